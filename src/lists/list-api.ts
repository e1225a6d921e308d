import { z } from 'zod';
import { changeReason } from '../audit/change-reason.ts';
import { LIST_KEY_KINDS } from '../policy/policy-schema.ts';
import { storableLine } from '../text/storable-text.ts';
import { MAX_LIST_VALUE_LENGTH } from './list-values.ts';

/**
 * The list endpoints' requests and answers (src/lists/list-routes.ts), as zod: they validate what
 * arrives and describe what leaves in the OpenAPI document.
 */

/** Longest time-to-live an entry may be given, seconds (about ten years). */
export const MAX_TTL_SECONDS = 3650 * 86_400;
/** Most entries one import takes. */
export const MAX_IMPORT_ENTRIES = 5000;
/** Largest body of an import, bytes. */
export const MAX_IMPORT_BODY_BYTES = 2 * 1024 * 1024;
/** Largest body of one entry's add or remove, bytes. */
export const MAX_ENTRY_BODY_BYTES = 4096;

const reasonSchema = changeReason().describe('Why: shown with the entry and in the audit trail.');

const ttlSecondsSchema = z
  .number()
  .int()
  .min(1)
  .max(MAX_TTL_SECONDS)
  .describe("Seconds until the entry stops matching; default: the list's `ttl` (none: never).");

export const addEntrySchema = z
  .object({
    value: storableLine()
      .max(MAX_LIST_VALUE_LENGTH)
      .describe('An address or CIDR for an `ip` list (kept as its network), else the id.'),
    reason: reasonSchema,
    ttlSeconds: ttlSecondsSchema.optional(),
  })
  .strict();
export type AddEntry = z.infer<typeof addEntrySchema>;

/** An import line: the reason may come from the `reason` query parameter instead. */
export const importEntrySchema = addEntrySchema.extend({ reason: reasonSchema.optional() });

export const importBodySchema = z.array(importEntrySchema).max(MAX_IMPORT_ENTRIES);

export const removeBodySchema = z.object({ reason: reasonSchema }).strict();

export const reasonQuerySchema = z.object({ reason: reasonSchema.optional() });

export const importQuerySchema = z.object({
  reason: reasonSchema.optional(),
  ttlSeconds: z.coerce.number().pipe(ttlSecondsSchema).optional(),
});

export const pageQuerySchema = z.object({
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(1000)
    .default(100)
    .describe('Most entries (1-1000, default 100).'),
  cursor: storableLine()
    .max(MAX_LIST_VALUE_LENGTH)
    .optional()
    .describe("The previous page's `nextCursor`: entries after it."),
});

const timestamp = z.iso.datetime().describe('RFC 3339, UTC.');

export const listEntrySchema = z.object({
  list: z.string(),
  value: z.string(),
  kind: z.enum(LIST_KEY_KINDS),
  author: z.string().describe("The operator's name (or key id) who added it."),
  reason: z.string(),
  createdAt: timestamp,
  expiresAt: timestamp.nullable().describe('When it stops matching; null: never.'),
});
export type ListEntryView = z.infer<typeof listEntrySchema>;

export const listSummarySchema = z.object({
  name: z.string(),
  key: z.enum(LIST_KEY_KINDS),
  ttlSeconds: z.number().int().nullable().describe("The list's default time-to-live; null: none."),
  description: z.string().optional(),
  entries: z.number().int().min(0).describe('Unexpired entries.'),
});

export const listsSchema = z.object({
  lists: z.array(listSummarySchema).describe('The lists the active policy declares.'),
  snapshot: z.object({
    ageMs: z.number().describe("How long ago this process's in-memory snapshot was last confirmed current."),
    stale: z.boolean().describe('Past the bound (10 s): rules reading lists see them unavailable.'),
  }),
});

export const listPageSchema = listSummarySchema.extend({
  items: z.array(listEntrySchema).describe('Unexpired entries, by value.'),
  nextCursor: z.string().optional().describe('Pass as `cursor` for the next page; absent on the last.'),
});

export const importResultSchema = z.object({
  list: z.string(),
  added: z.number().int().min(0),
});
