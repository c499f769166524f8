"""The ``logetl`` command. Click conventions: usage errors exit 2, a failed run exits 1, success 0.

Every user error is one line naming the bad value; a traceback is a bug.
"""
from __future__ import annotations

import sys

import click

from logetl import __version__, programs
from logetl.engines import EngineUnavailable, UnsupportedOperator

EXIT_USAGE, EXIT_FAILED = 2, 1


class UserError(click.ClickException):
    """One line on stderr, exit 2: the user asked for something that cannot be done."""

    exit_code = EXIT_USAGE


class RunFailed(click.ClickException):
    exit_code = EXIT_FAILED


def _engine_options(f):
    f = click.option("--work-dir", metavar="DIR", default=None,
                     help="Where checkpoints and other stored step outputs live "
                          "(default: .OUTPUT.logetl-work beside the first output).")(f)
    f = click.option("--overwrite", is_flag=True, help="Replace non-empty output directories.")(f)
    f = click.option("--trap", "trap", metavar="DIR", default=None,
                     help="Write malformed lines here, unchanged (DIR/part-00000).")(f)
    f = click.option("--conf", "confs", metavar="KEY=VALUE", multiple=True, callback=_parse_confs,
                     help="A Spark setting (repeatable), e.g. --conf spark.executor.memory=4g.")(f)
    f = click.option("--master", metavar="URL", default=None,
                     help="Spark master (default: $LOGETL_SPARK_MASTER, else local[*]; "
                          "under spark-submit, its own).")(f)
    f = click.option("--engine", type=click.Choice(["local", "spark"]), default=None,
                     help="Engine to run on (--hdfs is --engine spark).")(f)
    f = click.option("--hdfs", is_flag=True, help="Run on the distributed engine (Apache Spark).")(f)
    f = click.option("--quiet", "-q", is_flag=True, help="No summary or progress bar.")(f)
    return f


def _parse_confs(ctx, param, values):
    confs = {}
    for v in values:
        key, sep, value = v.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{v!r} is not KEY=VALUE", ctx=ctx, param=param)
        confs[key] = value
    return confs


def _run(program: str, input_path: str, outputs: dict[str, str], opts: dict, trap, overwrite: bool, quiet: bool,
         work_dir: str | None, checkpoint_dir: str | None = None):
    from logetl.console import ConsoleReporter
    from logetl.job import JobError, run_program

    if opts["hdfs"] and opts["engine"] == "local":
        raise UserError("--hdfs runs on spark: it cannot go with --engine local")
    engine = "spark" if opts["hdfs"] else (opts["engine"] or "local")
    engine_options = {}
    if engine == "spark":
        engine_options = {"master": opts["master"], "conf": opts["confs"]}
    elif opts["master"] or opts["confs"]:
        raise UserError("--master and --conf are Spark settings: use them with --hdfs")
    listener = ConsoleReporter(outputs={**outputs, **({"trap": trap} if trap else {})}, progress=None if not quiet else False)
    if quiet:
        listener.flow_finished = lambda run: None
        listener.notice = lambda run, message: None
    try:
        run_program(program, input_path, outputs, engine=engine, trap=trap, overwrite=overwrite, listener=listener,
                    work_dir=work_dir, checkpoint_dir=checkpoint_dir, engine_options=engine_options)
    except JobError as exc:
        raise UserError(str(exc)) from None
    except (EngineUnavailable, UnsupportedOperator) as exc:
        raise UserError(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("logetl: interrupted; no output was committed", err=True)
        sys.exit(130)
    except Exception as exc:  # the summary above already says FAILED; one line names the cause
        raise RunFailed(f"{program} failed: {exc}") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="logetl")
def main():
    """logetl: batch ETL for web-server access logs.

    Parses access-log lines (Apache combined format), and runs the Branch, Filter and Join programs on the
    embedded local engine (default) or on Apache Spark (--hdfs). Results are tab-separated files in an
    output directory (part-00000 and _SUCCESS).
    """


@main.command()
@click.option("--input", "input_path", required=True, metavar="IN", help="Log file, directory or glob.")
@click.option("--output1", required=True, metavar="OUT1", help="First output directory.")
@click.option("--output2", required=True, metavar="OUT2", help="Second output directory.")
@_engine_options
def branch(input_path, output1, output2, trap, overwrite, quiet, work_dir, **opts):
    """Write the parsed records to two identical outputs.

    Each output holds ip, time, request, response, size as TSV, in input order.

    \b
    Example:
      logetl branch --input access.log --output1 out/a --output2 out/b
    """
    _run("branch", input_path, {"output1": output1, "output2": output2}, opts, trap, overwrite, quiet, work_dir)


@main.command(name="filter")
@click.option("--input", "input_path", required=True, metavar="IN", help="Log file, directory or glob.")
@click.option("--output", required=True, metavar="OUT", help="Output directory.")
@_engine_options
def filter_(input_path, output, trap, overwrite, quiet, work_dir, **opts):
    """Write the distinct clients that requested the images area.

    Keeps records whose request starts with "GET /images/", one ip per line, ascending byte order.

    \b
    Example:
      logetl filter --input access.log --output out/images-clients
    """
    _run("filter", input_path, {"output": output}, opts, trap, overwrite, quiet, work_dir)


@main.command()
@click.argument("in_arg", required=False, metavar="[IN]")
@click.argument("out_arg", required=False, metavar="[OUTDIR]")
@click.option("--input", "input_path", metavar="IN", help="Log file, directory or glob (or give IN).")
@click.option("--output", metavar="OUTDIR", help="Output directory (or give OUTDIR).")
@click.option("--checkpoint-dir", metavar="DIR", default=None,
              help="Keep the checkpoint here after success (default: anonymous, deleted).")
@_engine_options
def join(in_arg, out_arg, input_path, output, checkpoint_dir, trap, overwrite, quiet, work_dir, **opts):
    """Join the images-area clients with their scored records, highest score first.

    Writes ip, userip, time, request, response, size, score as TSV to OUTDIR/part-00000; score is
    crc32(ip) % 100, records below 60 are left out; equal scores keep input order.

    A failed run keeps its completed checkpoint: running the same command again (same inputs, outputs
    and options) restarts after it.

    \b
    Examples:
      logetl join access.log out/joined
      logetl join --input 'logs/*.gz' --output out/joined
    """
    if in_arg and input_path or out_arg and output:
        raise click.UsageError("give the input and output either as arguments or as --input/--output, not both")
    input_path = input_path or in_arg
    output = output or out_arg
    if not input_path:
        raise click.UsageError("missing input: logetl join IN OUTDIR")
    if not output:
        raise click.UsageError("missing output directory: logetl join IN OUTDIR")
    _run("join", input_path, {"output": output}, opts, trap, overwrite, quiet, work_dir, checkpoint_dir)


@main.command()
@click.argument("program", type=click.Choice(sorted(programs.PROGRAMS)))
@click.option("--dot", is_flag=True, help="Print Graphviz DOT instead of text.")
def explain(program, dot):
    """Print a program's operators and steps, without running it.

    \b
    Examples:
      logetl explain join
      logetl explain join --dot | dot -Tpng > join.png
    """
    flow = programs.get(program)
    click.echo(flow.dot() if dot else flow.explain(), nl=False)


@main.command()
@click.option("--lines", "n_lines", type=click.IntRange(min=0), required=True, help="How many lines.")
@click.option("--seed", type=int, default=1, show_default=True, help="Same seed, same bytes.")
@click.argument("out", type=click.Path(dir_okay=False, writable=True))
def generate(n_lines, seed, out):
    """Write a seeded, realistic access log (Apache combined format) for testing pipelines.

    \b
    Example:
      logetl generate --lines 100000 --seed 7 sample.log
    """
    from logetl import generate as gen

    try:
        gen.write(out, n_lines, seed)
    except OSError as exc:
        raise UserError(f"cannot write {out!r}: {exc.strerror or exc}") from None
    click.echo(f"wrote {n_lines:,} lines to {out}", err=True)


if __name__ == "__main__":
    main()
