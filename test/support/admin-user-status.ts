import { createAdminClient } from '../../src/admin/admin-client.ts';
import { sandboxUpstream } from '../../src/dev/embedded-sandbox.ts';
import type { RunningSandbox } from '../../src/sandbox/server.ts';

/** The Admin user's status as the sandbox holds it, read over the signed Admin API. */
export async function adminUserStatus(sandbox: RunningSandbox, userId: string): Promise<string> {
  const u = sandboxUpstream(sandbox);
  const admin = createAdminClient({ baseUrl: u.adminUrl, serviceId: u.serviceId, apiKey: u.adminApiKey });
  try {
    const user = await admin.getUser(userId);
    if (!user.ok) throw new Error(`cannot read ${userId}: ${user.error.code}`);
    return user.value.status;
  } finally {
    await admin.close();
  }
}
