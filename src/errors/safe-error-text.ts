/** A failure's words for /healthz and the log: never a connection URL (it may hold a password). */
export function safeErrorText(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.replace(/[a-z][a-z0-9+.-]*:\/\/\S+/gi, '<url>').slice(0, 300);
}
