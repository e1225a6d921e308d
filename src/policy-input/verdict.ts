/** A decision's answer: what the login backend is told to do. */
export type Verdict = 'allow' | 'challenge' | 'deny';
