/**
 * How much longer than usual the tests wait: CNI_DRIVER_TEST_PATIENCE, a
 * factor (default 1). scripts/test-under-load.sh raises it. Every wait in the
 * tests bounds a hang, never a speed, so a loaded machine may stretch them all
 * alike: mocha's timeouts (the root hook below), until()'s bounds, a driver's
 * start.
 */
function factor(): number {
  const raw = process.env.CNI_DRIVER_TEST_PATIENCE;
  if (raw === undefined || raw === "") return 1;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 1)
    throw new Error(
      `CNI_DRIVER_TEST_PATIENCE must be a number of at least 1, not ${JSON.stringify(raw)}`,
    );
  return n;
}

export const PATIENCE = factor();

/** `ms` stretched by the patience factor. */
export function patient(ms: number): number {
  return Math.round(ms * PATIENCE);
}

interface Timed {
  timeout(): number;
  timeout(ms: number): unknown;
}
interface SuiteTree {
  suites: SuiteTree[];
  tests: Timed[];
  _beforeAll: Timed[];
  _beforeEach: Timed[];
  _afterAll: Timed[];
  _afterEach: Timed[];
}

/** The tests and hooks of a suite and its children, each with the timeout it has now. */
function runnables(suite: SuiteTree, out: Array<[Timed, number]> = []): Array<[Timed, number]> {
  const own = [
    ...suite.tests,
    ...suite._beforeAll,
    ...suite._beforeEach,
    ...suite._afterAll,
    ...suite._afterEach,
  ];
  for (const t of own) out.push([t, t.timeout()]);
  for (const s of suite.suites) runnables(s, out);
  return out;
}

/**
 * Every test's and hook's timeout stretched once, before anything runs. Read
 * all first, then set: a runnable's timeout may come from its suite's, so
 * setting as we go would stretch some twice. 0 (no timeout) stays 0.
 */
function stretch(root: SuiteTree): void {
  for (const [t, ms] of runnables(root)) if (ms > 0) t.timeout(patient(ms));
}

/** Mocha's root hooks (.mocharc.json requires this file). */
export const mochaHooks = {
  beforeAll(this: { test?: { parent?: SuiteTree } }) {
    const root = this.test?.parent;
    if (PATIENCE !== 1 && root) stretch(root);
  },
};
