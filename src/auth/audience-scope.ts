/**
 * The OAuth `scope` that names the Trust Signals audience (CONTRACT §3):
 * `urn:<idp>:iam:org:project:id:<audience>:aud`. One definition for the token manager that asks
 * for it and the sandbox that checks it.
 */
export function audienceScope(idp: string, audience: string): string {
  return `urn:${idp}:iam:org:project:id:${audience}:aud`;
}
