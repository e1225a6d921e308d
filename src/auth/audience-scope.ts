/**
 * The OAuth `scope` that names the Trust Signals audience (docs/vendor-api.md#oauth-token):
 * `urn:<idp>:iam:org:project:id:<audience>:aud`. One definition for the token manager that asks
 * for it and the sandbox that checks it.
 */
export function audienceScope(idp: string, audience: string): string {
  return `urn:${idp}:iam:org:project:id:${audience}:aud`;
}
