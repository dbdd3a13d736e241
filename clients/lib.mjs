// Shared by the client scripts: where the daemon is, which model to use, and
// a failing check that names what it saw.
export const base = process.env.MODELD_URL;
export const model = process.env.MODEL;
if (!base || !model) {
  console.error('set MODELD_URL (the daemon, no /v1) and MODEL');
  process.exit(2);
}

export function check(ok, what, seen) {
  if (!ok) {
    throw new Error(`${what}; got ${JSON.stringify(seen)}`);
  }
}

// run calls main and exits non-zero with the error on stderr when it throws.
export function run(main) {
  main().then(
    (out) => {
      console.log(JSON.stringify(out ?? {}));
    },
    (err) => {
      console.error(err?.stack ?? String(err));
      process.exit(1);
    },
  );
}
