// Comparing Spindle's next-token log-probabilities and greedy tokens with a reference's (llama.cpp through goldens or
// llama.node), as the vision conformance tests do.
import type { Test } from 'tap';

/** Nats between Spindle's top two: there the argmax may flip. */
export const NEAR_TIE = 0.05;

/**
 * Max |Spindle - reference| over the reference's top tokens, within `tol` nats; at least `minPresent` of them (or all,
 * when fewer) must be in Spindle's top 20 (one below it is far down the tail, compared through the rest).
 */
export function compareTop(t: Test, lp: Record<number, { logprob: number }>, top: [number, number][], what: string,
  tol: number, minPresent: number): void {
  let worst = 0;
  for (const [id, ref] of top) {
    if (lp[id] === undefined) continue;
    worst = Math.max(worst, Math.abs(lp[id].logprob - ref));
  }
  const present = top.filter(([id]) => lp[id] !== undefined).length;
  t.ok(present >= Math.min(top.length, minPresent), `${what}: ${present} of the reference's top ${top.length} in Spindle's top 20`);
  t.ok(worst <= tol, `${what}: log-probabilities within ${tol} (max |diff| ${worst.toExponential(2)})`);
}

/** How many greedy tokens must agree: all n, or those before the first near-tie in Spindle's own margins. */
export function greedyAgreementNeeded(logprobs: Record<number, { logprob: number }>[], n: number): number {
  const at = logprobs.findIndex((e) => {
    const v = Object.values(e).map((x) => x.logprob).sort((a, b) => b - a);
    return v.length > 1 && v[0] - v[1] <= NEAR_TIE;
  });
  return at < 0 ? n : Math.min(n, at);
}
