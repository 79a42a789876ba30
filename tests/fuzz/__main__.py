"""python -m tests.fuzz run|rerun|show|minimise (from the repository root; `make fuzz` runs `run`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tests.fuzz import runner
from tests.fuzz.generator import MODES, generate, model_source


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="check seeds START..START+N-1; write reproducers and a summary")
    run.add_argument("-n", "--seeds", type=int, default=100)
    run.add_argument("--start", type=int, default=0)
    run.add_argument("--target", default="host")
    run.add_argument("--opt", choices=("speed", "size"), default="speed", help="edgec build --opt")
    run.add_argument(
        "--mode",
        choices=MODES,
        default="int8",
        help="int16: some layers built with --int16-layers; stream: recurrent models built with --stream, "
        "checked as a stream; multi: models with several outputs",
    )
    run.add_argument("--out", type=Path, help="default build/fuzz/<target>[-size][-<mode>]")
    run.add_argument("--minimise", action="store_true", help="also minimise every failure (slow)")
    run.add_argument(
        "--min-sqnr",
        type=float,
        default=runner.MIN_SQNR_DB,
        help="output SQNR (dB) below which a bit-exact model counts as inaccurate",
    )

    rerun = commands.add_parser("rerun", help="check a model file (a reproducer) again")
    rerun.add_argument("file", type=Path)
    rerun.add_argument("--target", default="host")
    rerun.add_argument("--opt", choices=("speed", "size"), default="speed")

    show = commands.add_parser("show", help="print the model file of a seed")
    show.add_argument("seed", type=int)
    show.add_argument("--mode", choices=MODES, default="int8")

    reduce = commands.add_parser("minimise", help="minimise a failing seed or reproducer file")
    reduce.add_argument("model", help="a seed, or a model file")
    reduce.add_argument("--mode", choices=MODES, default="int8", help="the seed's mode")
    reduce.add_argument("--target", default="host")
    reduce.add_argument("--opt", choices=("speed", "size"), default="speed")
    reduce.add_argument("--out", type=Path, default=Path("build/fuzz/minimised"))
    reduce.add_argument("--budget", type=int, default=150, help="most checks to try")

    args = parser.parse_args(argv)
    if args.command == "show":
        print(model_source(generate(args.seed, args.mode)), end="")
        return 0
    size = getattr(args, "opt", "speed") == "size"
    target = args.target + (":size" if size else "")
    if args.command == "run":
        mode = "" if args.mode == "int8" else f"-{args.mode}"
        out = args.out or Path("build/fuzz") / (args.target + ("-size" if size else "") + mode)
        batch = runner.run_batch(
            range(args.start, args.start + args.seeds),
            target,
            out,
            mode=args.mode,
            minimise_failures=args.minimise,
            min_sqnr_db=args.min_sqnr,
        )
        print((out / "summary.txt").read_text(), end="")
        return 1 if any(o.failed for o in batch.outcomes.values()) else 0
    if args.command == "rerun":
        return runner.rerun_main(str(args.file), ["--target", args.target, "--opt", args.opt])
    spec = generate(int(args.model), args.mode) if args.model.isdigit() else runner.spec_from_file(Path(args.model))
    work = args.out / "work"
    outcome = runner.check_spec(spec, target, work)
    print(f"seed {spec.seed}: {outcome.verdict} at {outcome.phase}: {outcome.message}")
    if outcome.verdict == "ok":
        print("nothing to minimise")
        return 0
    small, small_outcome = runner.minimise(spec, target, work, outcome, args.budget, log=print)
    path = runner.write_reproducer(small, small_outcome, target, args.out)
    print(
        f"{len(small.layers)} layers, input {small.input_shape}: {small_outcome.verdict} at "
        f"{small_outcome.phase}: {small_outcome.message}\nwrote {path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
