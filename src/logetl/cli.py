"""The ``logetl`` command. Click conventions: usage errors exit 2, a failed run exits 1, success 0,
interrupted 130, terminated 128 + the signal (``logetl.errors``).

Every user error is one line naming the bad value; a traceback is a bug (``LOGETL_DEBUG=1`` shows it).
"""
from __future__ import annotations

import os
import stat
import sys
import traceback

# logetl does no linear algebra, but pyarrow imports numpy, and numpy's OpenBLAS starts a thread per core
# that spins while idle: ~0.08 s of CPU per command that writes Parquet (measured on 2 cores), taken from
# the parse threads. Set before anything imports numpy; a user's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import click

from logetl import __version__, errors, programs, settings
from logetl.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, LogetlError, RunFailed

__all__ = ["main", "EXIT_FAILED", "EXIT_USAGE"]


#: one line on stderr, exit 2: the user asked for something that cannot be done
UserError = errors.UsageError


class _Shown(click.ClickException):
    """A ``LogetlError`` as Click shows it: ``Error: <message>``, the error class's exit code."""

    def __init__(self, exc: LogetlError):
        super().__init__(errors.message(exc))
        self.exit_code = exc.exit_code


class _OptionsOnce:
    """Refuses an option of one value given more than once: Click keeps the last, so ``--input a.log
    --input b.log`` would read only b.log without a word."""

    def parse_args(self, ctx, args):
        try:
            _, _, order = self.make_parser(ctx).parse_args(args=list(args))
        except click.UsageError:
            order = []                 # the parse below raises it, as Click words it
        seen = set()
        for param in order:
            if isinstance(param, click.Option) and not (param.multiple or param.count or param.is_flag):
                if param.name in seen:
                    raise UserError(f"{param.opts[0]} is given more than once: give it once")
                seen.add(param.name)
        return super().parse_args(ctx, args)


class _Command(_OptionsOnce, click.Command):
    pass


class _Group(_OptionsOnce, click.Group):
    """Turns every ``LogetlError`` raised below into one line and its exit code, and any other exception
    into one line and exit 1 (the traceback only with LOGETL_DEBUG=1)."""

    command_class = _Command
    group_class = type          # subgroups (monitor, monitor keys) are _Groups too

    def main(self, *args, **kwargs):
        _occupy_closed_std_fds()
        given = kwargs.get("args", args[0] if args else None)
        self.said = errors.said_when_stopped(sys.argv[1:] if given is None else given)
        with errors.signals_of_command(self.said):
            return super().main(*args, **kwargs)

    def invoke(self, ctx):
        # while the command works, a signal raises (KeyboardInterrupt, errors.Terminated) so that what it
        # made is removed; it ends here as one line (not Click's "Aborted!", exit 1)
        with errors.interrupting_signals():
            try:
                return self._invoke(ctx)
            except KeyboardInterrupt as exc:
                # (before Click has named the subcommand, what the command line names)
                _stopped(exc, errors.said_when_stopped([ctx.invoked_subcommand]) if ctx.invoked_subcommand
                         else getattr(self, "said", ""))

    def _invoke(self, ctx):
        """Every ``LogetlError`` as one line; anything else as one line naming it as internal."""
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, KeyboardInterrupt):
            raise
        except LogetlError as exc:
            if errors.debug():
                traceback.print_exc()
            raise _Shown(exc) from None
        except BrokenPipeError:
            _silence_stderr()
            sys.exit(EXIT_FAILED)
        except Exception as exc:   # a bug: still one line, unless asked for the traceback
            if errors.interrupt_of(exc) is not None:
                raise errors.interrupt_of(exc) from None    # a signal, wrapped on its way: stopped
            if errors.debug():
                raise
            raise _Shown(RunFailed(f"internal error: {type(exc).__name__}: {exc} (LOGETL_DEBUG=1 shows where)")) \
                from None


def _stopped(exc: KeyboardInterrupt, said: str) -> None:
    """Ends a command stopped by a signal: one line (what it stopped, and ``said``: what that left), exit
    ``128 + N`` (130 for Ctrl-C)."""
    errors.say_stopped(errors.stop_reason(exc), said)
    errors.exit_stopped(getattr(exc, "exit_code", EXIT_INTERRUPTED))


def _occupy_closed_std_fds() -> None:
    """A command started with a standard stream closed (``2>&-``) runs as with it sent to /dev/null.
    Python leaves ``sys.stderr`` None then, and the free descriptor 2 would be the next file opened (an
    output part, which anything written to "stderr" by the kernel or a JVM would then corrupt)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)      # the lowest free descriptor: this one
    for name in ("stdin", "stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "r" if name == "stdin" else "w"))


def _silence_stderr() -> None:
    from logetl.console import silence_broken_pipe

    silence_broken_pipe()


def _format_options(f):
    f = click.option("--format-file", "format_file", metavar="FILE[#NAME]", default=None,
                     help="Read the log format from a server config: a LogFormat (Apache) or log_format "
                          "(nginx) line; #NAME picks one of several.")(f)
    f = click.option("--format", "log_format", metavar="FORMAT", default=None,
                     help="Log format: combined (default), common, vhost_combined, nginx, alb, elb, s3, "
                          "haproxy, cloudfront, caddy, traefik, nginx_json (JSON lines), auto (recognised from the "
                          "input's first lines), json:NAME=KEY.PATH,... (any JSON-lines log), or an Apache "
                          "LogFormat / nginx log_format string.")(f)
    return f


def _engine_options(f):
    f = _format_options(f)
    f = click.option("--tag", "tags", metavar="KEY=VALUE", multiple=True, callback=_parse_confs,
                     help="A tag for the monitor (repeatable), e.g. --tag team=web.")(f)
    f = click.option("--app-name", metavar="NAME", default=None, callback=_app_name,
                     help="Application name in the monitor (default: logetl-PROGRAM; at most 200 "
                          "characters, no control characters).")(f)
    f = click.option("--work-dir", metavar="DIR", default=None,
                     help="Where checkpoints and other stored step outputs live "
                          "(default: .OUTPUT.logetl-work beside the first output).")(f)
    f = click.option("--overwrite", is_flag=True, help="Replace non-empty output directories.")(f)
    f = click.option("--incremental", is_flag=True,
                     help="(local engine; flows of per-record operators) Read only the complete lines that are "
                          "new since the last run, rotated logs included, and add their records to the "
                          "outputs as new part files.")(f)
    f = click.option("--header/--no-header", "header", default=None,
                     help="Start each TSV or CSV part file with a line of the field names, or not (default: "
                          "CSV has one, TSV none).")(f)
    f = click.option("--output-format", type=click.Choice(["tsv", "csv", "parquet", "jsonl"]), default=None,
                     help="Write every output as TSV (default: the contract's bytes), CSV (RFC 4180, with a "
                          "header), Parquet (typed columns) or JSON Lines.")(f)
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
    f = click.option("--quiet", "-q", is_flag=True, help="No summary or progress bar (warnings still show).")(f)
    f = click.option("--memory-limit", metavar="SIZE", default=None,
                     help="(local engine) Memory the run should stay under, e.g. 512M, 2G (default "
                          f"{settings.MEMORY_LIMIT.shown.strip('`')}): "
                          "sorts and distinct sets past it spill to the working directory.")(f)
    f = click.option("--max-malformed", metavar="FRACTION", type=click.FloatRange(0.0, 1.0), default=None,
                     callback=_not_nan,
                     help="Fail the run (exit 1, nothing published) when more than this share of the lines "
                          "read is malformed, e.g. 0.05. Default: no limit.")(f)
    return f


def _app_name(ctx, param, value):
    """Checked before the run starts, against the limit the monitor's store and server keep: a name they
    would refuse would leave a run that no monitor shows."""
    if value:
        from logetl.monitor.documents import LENGTHS, name_problem

        why = name_problem("--app-name", value, LENGTHS["application"])
        if why:
            raise UserError(why)
    return value


def _not_nan(ctx, param, value):
    # FloatRange lets NaN through (every comparison with it is false), and a NaN threshold never triggers
    if value is not None and value != value:
        raise click.BadParameter(f"{value} is not in the range 0.0<=x<=1.0.", ctx=ctx, param=param)
    return value


def _parse_confs(ctx, param, values):
    confs = {}
    for v in values:
        key, sep, value = v.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{v!r} is not KEY=VALUE", ctx=ctx, param=param)
        confs[key] = value
    return confs


def _flow(program: str | None, flow_file: str | None, log_format: str | None, format_file: str | None):
    """The flow to run or explain: a program's, or the one a flow file defines."""
    from logetl import flowfile, formats
    from logetl.job import program_flow

    fmt = formats.resolve(log_format, format_file)
    if flow_file is not None:
        return flowfile.load(flow_file, fmt, format_given=log_format is not None or format_file is not None)
    return program_flow(program, fmt)


def _engine(opts: dict) -> str:
    if opts["hdfs"] and opts["engine"] == "local":
        raise UserError("--hdfs runs on spark: it cannot go with --engine local")
    return "spark" if opts["hdfs"] else (opts["engine"] or "local")


def _recognised(opts: dict, input_path: str, quiet: bool) -> dict:
    """``opts`` with ``--format auto`` replaced by the format recognised from the start of the input (the
    choice said on stderr); other formats as given."""
    if opts["log_format"] != "auto" or opts["format_file"] is not None:
        return opts
    from logetl.detect import detect_input

    if opts["hdfs"]:
        raise UserError("--format auto reads the start of local input files: with --hdfs, give --format")
    detected = detect_input(input_path)
    if not quiet:
        click.echo(f"logetl: {detected.describe()}", err=True)
    return {**opts, "log_format": detected.name}


def _run(program: str | None, input_path: str, outputs: dict[str, str], opts: dict, trap, overwrite: bool,
         quiet: bool, work_dir: str | None, checkpoint_dir: str | None = None, flow_file: str | None = None,
         flow=None, shown: dict[str, str] | None = None):
    """Runs a program, a flow file's flow or ``flow``; ``shown``: how the summary names the outputs (default
    their paths)."""
    from logetl.console import ConsoleReporter
    from logetl.job import engine_options_for, run_flow

    if flow is None:
        opts = _recognised(opts, input_path, quiet)
        flow = _flow(program, flow_file, opts["log_format"], opts["format_file"])
    engine = _engine(opts)
    # checked as run_flow checks its engine_options: one place says what each engine takes
    engine_options = engine_options_for(engine, {"memory_limit": opts["memory_limit"], "master": opts["master"],
                                                 "conf": opts["confs"] or None})
    listener = ConsoleReporter(outputs={**(shown or outputs), **({"trap": trap} if trap else {})}, quiet=quiet)
    try:
        with errors.ended_by_signals():     # SIGTERM and SIGHUP stop the run as Ctrl-C does
            run_flow(flow, input_path, outputs, engine=engine, trap=trap, overwrite=overwrite, listener=listener,
                     work_dir=work_dir, checkpoint_dir=checkpoint_dir, engine_options=engine_options,
                     application=opts["app_name"], tags=opts["tags"], quiet=quiet,
                     max_malformed=opts["max_malformed"], incremental=opts["incremental"],
                     output_format=opts["output_format"], header=opts["header"])
            errors.command_done()           # the outputs are committed: a signal from now on changes nothing
    except errors.UsageError:
        raise
    except KeyboardInterrupt as exc:
        _run_stopped(exc, listener.run)
    except Exception as exc:  # the summary above already says FAILED; one line names the cause
        stop = errors.interrupt_of(exc)
        if stop is not None:      # a signal, wrapped on its way: the run was stopped
            _run_stopped(stop, listener.run)
        if errors.debug():
            traceback.print_exc()
        full = listener.run.full if listener.run is not None else None    # engines.base.full_places
        raise RunFailed(f"{flow.name} failed: {errors.out_of_space_reason(exc)}: {full}" if full
                        else f"{flow.name} failed: {errors.message(exc)}") from None


def _run_stopped(exc: KeyboardInterrupt, run) -> None:
    """Ends a run stopped by a signal: one line that says what it left (``run``: the ``FlowRun``, None when
    it never started)."""
    if run is not None and run.publishing:
        errors.say_stopped(f"{errors.stop_reason(exc)} while publishing the outputs",
                           "run the same command again to finish")
    else:
        errors.say_stopped(errors.stop_reason(exc), "no output was committed")
    errors.exit_stopped(getattr(exc, "exit_code", EXIT_INTERRUPTED))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="logetl")
def main():
    """logetl: batch ETL for web-server access logs.

    Parses access-log lines (Apache combined format by default), and runs the Branch, Filter and Join
    programs, or a flow of your own (logetl run FLOW.py), on the embedded local engine (default) or on
    Apache Spark (--hdfs). Results are tab-separated files (or CSV, Parquet, JSON Lines: --output-format)
    in an output directory (part-* files, which concatenate in name order to the result, and _SUCCESS).

    Exit codes: 0 success, 1 a failed run (nothing published), 2 a usage error, 130 interrupted (Ctrl-C),
    143 and 129 terminated by SIGTERM and SIGHUP (nothing published).
    Set LOGETL_DEBUG=1 to see tracebacks.
    """


@main.command()
@click.option("--input", "input_path", required=True, metavar="IN",
              help="Log file, directory or glob; - reads standard input.")
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
@click.option("--input", "input_path", required=True, metavar="IN",
              help="Log file, directory or glob; - reads standard input.")
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

    Writes ip, userip, time, request, response, size, score as TSV to OUTDIR/part-* (one part on the
    local engine; on Spark, parts to concatenate in name order); score is
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
@click.argument("query", metavar="QUERY")
@click.option("--input", "input_path", required=True, metavar="IN",
              help="Log file, directory or glob; - reads standard input.")
@click.option("--output", metavar="DIR", default=None,
              help="Write the result here (part-* and _SUCCESS, as every output); without it the result "
                   "prints: an aligned table on a terminal, TSV with a header line when piped.")
@_engine_options
def sql(query, input_path, output, trap, overwrite, quiet, work_dir, **opts):
    """Run a SQL query (DuckDB's dialect) over the log: the table log has one string column per field of
    the log format, as parsed. QUERY is the query's text, or @FILE.sql.

    Malformed lines are not rows: they are counted, trapped (--trap) and thresholded (--max-malformed) as in
    every run. On the local engine the query runs in DuckDB within --memory-limit (it spills to the working
    directory); with --hdfs it runs as Spark SQL, translated, and only the portable subset is accepted.

    \b
    Examples:
      logetl sql "SELECT response, count(*) AS n FROM log GROUP BY response ORDER BY n DESC" --input access.log
      logetl sql @top_paths.sql --input 'logs/*.gz' --output out/top --hdfs
    """
    from logetl.sql import shell

    opts = _recognised(opts, input_path, quiet)
    flow = shell.query_flow(shell.query_text(query), _engine(opts), opts["log_format"], opts["format_file"],
                            opts["output_format"], output is not None)
    if output is not None:
        _run(None, input_path, {"output": output}, opts, trap, overwrite, quiet, work_dir, flow=flow)
        return
    with shell.result_directory(opts["output_format"]) as tmp:
        _run(None, input_path, {"output": tmp}, {**opts, "header": False}, trap, True, quiet, work_dir, flow=flow,
             shown={"output": "(standard output)"})
        shell.show(tmp, flow, sys.stdout, header=opts["header"] is not False)


def _parse_outputs(ctx, param, values):
    outputs = {}
    for v in values:
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            raise click.BadParameter(f"{v!r} is not NAME=PATH", ctx=ctx, param=param)
        if name in outputs:
            raise click.BadParameter(f"output {name!r} is given twice", ctx=ctx, param=param)
        outputs[name] = path
    return outputs


@main.command()
@click.argument("flow_file", metavar="FLOW.py")
@click.option("--input", "input_path", required=True, metavar="IN",
              help="Log file, directory or glob; - reads standard input.")
@click.option("--output", "outputs", required=True, multiple=True, metavar="NAME=PATH", callback=_parse_outputs,
              help="Where the flow's output NAME goes (repeat for each of its outputs).")
@click.option("--checkpoint-dir", metavar="DIR", default=None,
              help="Keep the flow's checkpoint here after success (a flow with one checkpoint).")
@_engine_options
def run(flow_file, input_path, outputs, checkpoint_dir, trap, overwrite, quiet, work_dir, **opts):
    """Run the flow a Python file defines (see logetl.api).

    FLOW.py defines flow(fmt): a function that takes the log format (--format; default combined) and
    returns a logetl.api.Flow whose sinks name its outputs; it imports modules beside it, as under
    python FLOW.py. Every option of the programs applies: the
    engine (--hdfs), --trap, --overwrite, --work-dir, restart after a checkpoint, the monitor.

    \b
    Examples:
      logetl run examples/status_by_hour.py --input access.log --output counts=out/counts
      logetl run examples/top_clients.py --input 'logs/*.gz' --output top=out/top --hdfs
    """
    _run(None, input_path, outputs, opts, trap, overwrite, quiet, work_dir, checkpoint_dir, flow_file=flow_file)


@main.command()
@click.option("--input", "input_path", required=True, metavar="IN",
              help="Log file, directory or glob (rotated and .gz logs too); - reads standard input.")
@click.option("--output", "out_dir", required=True, metavar="DIR",
              help="Where report.json (and index.html) go.")
@click.option("--who", type=click.Choice(["all", "humans", "crawlers"]), default="all", show_default=True,
              help="Count every request, or only humans' or crawlers' (by user agent) in every panel.")
@click.option("--from", "date_from", metavar="YYYY-MM-DD", default=None,
              help="Only requests of this day or later (the day as written in the log).")
@click.option("--until", "date_until", metavar="YYYY-MM-DD", default=None,
              help="Only requests of this day or earlier.")
@click.option("--where", metavar="EXPR", default=None,
              help='Only requests where a flow expression holds, e.g. \'response == "200"\' or '
                   '\'path(request).starts_with("/blog/")\'.')
@click.option("--geoip", metavar="FILE.mmdb", default=None,
              help="A MaxMind-format database: adds the countries and ASNs panels.")
@click.option("--rebuild", is_flag=True, default=False,
              help="With --incremental: start the report's state afresh, reading every line.")
@_engine_options
def report(input_path, out_dir, who, date_from, date_until, where, geoip, trap, overwrite, quiet, work_dir,
           rebuild, **opts):
    """Write a traffic report of access logs: DIR/report.json (every panel's data) and DIR/index.html.

    Visitors per day, requested paths, 404s, hosts, operating systems, browsers, hours of the day,
    referring sites, status codes and crawlers, with humans and crawlers apart (--who), on the local
    engine or on Spark (--hdfs). See the guide "Traffic report" for every definition.

    \b
    Examples:
      logetl report --input access.log --output report/
      logetl report --input 'logs/access.log*' --output report/ --who humans --from 2015-05-18
      logetl report --input 'logs/access.log*' --output report/ --incremental
    """
    _report(input_path, out_dir, who, date_from, date_until, where, geoip, trap, overwrite, quiet, work_dir,
            opts, rebuild)


# the run options report has no use for (it writes report.json, never output directories): refused in one
# line when given, and left out of its --help
for _param in report.params:
    if _param.name in ("output_format", "header", "work_dir"):
        _param.hidden = True
    if _param.name == "incremental":
        _param.help = ("Read only the lines that are new since the last --incremental report in DIR, whose "
                       "aggregates DIR/.report-state keeps; the report equals one over every line.")


def _report(input_path, out_dir, who, date_from, date_until, where, geoip, trap, overwrite, quiet, work_dir,
            opts, rebuild=False):
    from logetl import formats
    from logetl.console import ConsoleReporter
    from logetl.job import engine_options_for
    from logetl.report.build import build

    for option, given in (("--output-format", opts["output_format"]), ("--header", opts["header"]),
                          ("--work-dir", work_dir)):
        if given is not None:
            raise UserError(f"{option} is not an option of report (it writes report.json)")
    engine = _engine(opts)
    engine_options = engine_options_for(engine, {"memory_limit": opts["memory_limit"], "master": opts["master"],
                                                 "conf": opts["confs"] or None})
    opts = _recognised(opts, input_path, quiet)
    fmt = formats.resolve(opts["log_format"], opts["format_file"])
    listener = ConsoleReporter(outputs={"report": out_dir, **({"trap": trap} if trap else {})}, quiet=True)
    run_options = {"engine": engine, "trap": trap, "listener": listener, "engine_options": engine_options,
                   "application": opts["app_name"], "tags": opts["tags"], "quiet": quiet,
                   "max_malformed": opts["max_malformed"]}
    try:
        with errors.ended_by_signals():
            result = build(input_path, out_dir, fmt, who=who, where=where, date_from=date_from,
                           date_until=date_until, geoip=geoip, overwrite=overwrite, run_options=run_options,
                           incremental=opts["incremental"], rebuild=rebuild)
            errors.command_done()
    except errors.UsageError:
        raise
    except KeyboardInterrupt as exc:
        click.echo(f"logetl: {errors.stop_reason(exc)}; no report was written", err=True)
        errors.exit_stopped(getattr(exc, "exit_code", EXIT_INTERRUPTED))
    except Exception as exc:  # one line names the cause
        if errors.debug():
            traceback.print_exc()
        raise RunFailed(f"report failed: {errors.message(exc)}") from None
    if not quiet:
        g = result["general"]
        click.echo(f"report: {g['hits']:,} requests, {g['unique_visitors']:,} visitors, "
                   f"{g['failed_requests']:,} failed; wrote {os.path.join(out_dir, 'report.json')} and index.html", err=True)


@main.command()
@click.argument("program", metavar="PROGRAM|FLOW.py")
@click.option("--dot", is_flag=True, help="Print Graphviz DOT instead of text.")
@_format_options
def explain(program, dot, log_format, format_file):
    """Print a program's (or a flow file's) operators and steps, without running it.

    \b
    Examples:
      logetl explain join
      logetl explain examples/top_clients.py
      logetl explain join --dot | dot -Tpng > join.png
    """
    if program in programs.PROGRAMS:
        flow = _flow(program, None, log_format, format_file)
    elif program.endswith(".py") or os.path.sep in program:
        flow = _flow(None, program, log_format, format_file)
    else:
        raise click.BadParameter(f"{program!r} is neither a program ({', '.join(sorted(programs.PROGRAMS))}) "
                                 "nor a flow file (FLOW.py)", param_hint="PROGRAM|FLOW.py")
    click.echo(flow.dot() if dot else flow.explain(), nl=False)


@main.command()
@click.option("--lines", "n_lines", type=click.IntRange(min=0), required=True, help="How many lines.")
@click.option("--seed", type=int, default=1, show_default=True, help="Same seed, same bytes.")
@click.option("--overwrite", is_flag=True, help="Replace OUT if it exists (without it, an existing OUT is refused).")
@click.argument("out", type=click.Path(dir_okay=False, allow_dash=True))
def generate(n_lines, seed, out, overwrite):
    """Write a seeded, realistic access log (Apache combined format) for testing pipelines; OUT - writes
    it to standard output.

    \b
    Example:
      logetl generate --lines 100000 --seed 7 sample.log
    """
    from logetl import generate as gen

    if out == "-":
        try:
            gen.write_stream(sys.stdout.buffer, n_lines, seed)
            sys.stdout.buffer.flush()
        except BrokenPipeError:     # `logetl generate ... - | head`: the reader had enough
            _silence_stderr()
            sys.exit(EXIT_FAILED)
        except KeyboardInterrupt as exc:
            _stopped(exc, "the log sent to standard output is incomplete")
        return
    # a typo must not cost a real log: an existing file is replaced only when asked (then at once, by a
    # rename: a run that stops half-way leaves the old file, not half a log). A symbolic link is followed
    # (the file it names is replaced, the link stays); what is no regular file (a FIFO, /dev/stdout) is
    # written into, as before.
    try:
        kind = stat.S_IFMT(os.stat(out).st_mode)      # followed: what a link names
    except FileNotFoundError:
        kind = None
    if kind == stat.S_IFREG and not overwrite:
        raise UserError(f"{out!r} exists: generate does not replace a file unless given --overwrite")
    try:
        if kind not in (None, stat.S_IFREG):
            with open(out, "wb") as f:
                gen.write_stream(f, n_lines, seed)
        else:
            gen.write(os.path.realpath(out), n_lines, seed, replace=overwrite)
    except FileExistsError:
        raise UserError(f"{out!r} exists: generate does not replace a file unless given --overwrite") from None
    except OSError as exc:
        raise UserError(f"cannot write {out!r}: {errors.reason(exc)}") from None
    click.echo(f"wrote {n_lines:,} lines to {out}", err=True)


def _store(db: str | None):
    from logetl.monitor.reporter import home
    from logetl.monitor.store import Store, default_url

    if db is not None and not db.strip():   # an unset shell variable: it must not mean the default store
        raise UserError("--db must not be empty: give a database URL (sqlite:///path.db or postgresql://...)")
    url = db or settings.MONITOR_DB.read() or default_url(home())
    if url.startswith("sqlite:///"):
        os.makedirs(os.path.dirname(os.path.abspath(url[len("sqlite:///"):])), exist_ok=True)
    try:
        return Store(url)
    except Exception as exc:
        raise UserError(f"cannot open the monitor database {url!r}: {str(exc).splitlines()[0]}") from None


_db_option = click.option("--db", metavar="URL", default=None,
                          help="Database URL: sqlite:///path.db (default: $LOGETL_HOME/monitor.db) or "
                               "postgresql://user:password@host:port/db.")


@main.group(invoke_without_command=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@_db_option
@click.option("--require-key", is_flag=True, help="Require an API key even before any key exists.")
@click.option("--allow-public-without-keys", is_flag=True,
              help="Serve on a non-loopback address although no API keys exist (everyone sees every run).")
@click.option("--public-url", metavar="URL", default=None,
              help="The address people reach this monitor at, for the run links in alerts "
                   "(default: http://HOST:PORT).")
@click.option("--openlineage-url", metavar="URL", default=None,
              help="Send OpenLineage run events (START, COMPLETE, FAIL, ABORT) to URL/api/v1/lineage "
                   "(default: $LOGETL_OPENLINEAGE_URL; needs pip install 'logetl[lineage]').")
@click.option("--openlineage-namespace", metavar="NAME", default="logetl", show_default=True,
              help="The OpenLineage job namespace (the job name is OWNER/APPLICATION).")
@click.option("--webhook-allow", "webhook_allow", metavar="HOST", multiple=True,
              help="A host name, address or network (CIDR) on the local network that alert webhooks may "
                   "reach (repeatable; default none: webhooks reach only public addresses). "
                   "Also $LOGETL_WEBHOOK_ALLOW, comma-separated.")
@click.pass_context
def monitor(ctx, host, port, db, require_key, allow_public_without_keys, public_url, openlineage_url,
            openlineage_namespace, webhook_allow):
    """Serve the run monitor: all applications, each run's graph, timeline and counters.

    Runs record their documents in the store under $LOGETL_HOME (default ~/.logetl) unless
    LOGETL_MONITOR_URL points them at a monitor server (with LOGETL_API_KEY).

    \b
    Examples:
      logetl monitor                       # http://127.0.0.1:8080
      logetl monitor keys create --user alice
      logetl monitor --host 0.0.0.0 --port 8080 --db postgresql://logetl@db/logetl
    """
    if ctx.invoked_subcommand is not None:
        ctx.obj = {"db": db}
        return
    from logetl.monitor.app import create_app, is_loopback

    if openlineage_url is None:
        openlineage_url = settings.OPENLINEAGE_URL.read()
    if not _host_ok(host):   # before anything that names the host as if it were one
        raise UserError(f"--host must be an IP address or a host name, not {host!r}")
    store = _store(db)
    if not is_loopback(host) and not (store.keys_required() or require_key) and not allow_public_without_keys:
        raise UserError(f"refusing to serve every run to anyone on {host}: create an API key "
                        "(logetl monitor keys create --user NAME), or pass --require-key, or "
                        "--allow-public-without-keys")
    for name, url in (("--public-url", public_url), ("--openlineage-url", openlineage_url)):
        if url is not None and not _http_url(url):
            raise UserError(f"{name} must be an http:// or https:// URL, not {url!r}")
    allow = _webhook_allow(webhook_allow)
    if openlineage_url:
        from logetl.monitor.lineage import available

        missing = available()
        if missing:
            raise UserError(f"--openlineage-url: {missing}")
    import uvicorn

    sock = _listen(host, port)
    shown = f"[{host}]" if ":" in host else host      # an IPv6 address is bracketed in a URL
    address = f"http://{shown}:{sock.getsockname()[1]}"   # the port bound: --port 0 picks one
    click.echo(f"logetl monitor on {address} (database {store.url})", err=True)
    config = uvicorn.Config(create_app(store, require_key=require_key, host=host,
                                       allow_public_without_keys=allow_public_without_keys,
                                       public_url=public_url or address,
                                       openlineage_url=openlineage_url,
                                       openlineage_namespace=openlineage_namespace, webhook_allow=allow),
                            host=host, port=port, log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


def _webhook_allow(given) -> list[str]:
    """``--webhook-allow`` entries and ``$LOGETL_WEBHOOK_ALLOW``'s, each checked."""
    from logetl.monitor.outbound import WebhookPolicy

    allow = [*given, *settings.WEBHOOK_ALLOW.read()]
    for entry in allow:
        try:
            WebhookPolicy.parse(entry)
        except ValueError as exc:
            raise UserError(f"--webhook-allow: {exc}") from None
    return allow


def _webhook_policy(given):
    from logetl.monitor.outbound import WebhookPolicy

    return WebhookPolicy(_webhook_allow(given))


def _host_ok(host: str) -> bool:
    """An IP address, or a host name (RFC 1123 labels; the last one not all digits, so ``256.1.1.1`` is not
    taken for a name)."""
    import ipaddress
    import re

    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    labels = host[:-1].split(".") if host.endswith(".") else host.split(".")
    return (0 < len(host) <= 253 and not labels[-1].isdigit()
            and all(re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?", label) for label in labels))


def _db(ctx, db: str | None) -> str | None:
    """A subcommand's --db, else the group's (``monitor --db URL keys list``); '' is kept, to be refused."""
    return db if db is not None else (ctx.obj or {}).get("db")


def _listen(host: str, port: int):
    """The server's listening socket, bound here so that a port in use is one line (exit 2), not a log."""
    import errno
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                              flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise UserError(f"cannot listen on {host}: {errors.reason(exc)}") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UserError(f"port {port} on {host} is in use: stop what listens there or choose another "
                            "--port") from None
        raise UserError(f"cannot listen on {host} port {port}: {errors.reason(exc)}") from None
    sock.set_inheritable(True)
    return sock


@monitor.group()
def keys():
    """Manage API keys (each key belongs to a user; keys are stored hashed).

    \b
    Example:
      logetl monitor keys create --user alice
    """


@keys.command("create")
@click.option("--user", required=True, help="The user the key belongs to.")
@_db_option
@click.pass_context
def keys_create(ctx, user, db):
    """Create a key and print it once: it is stored only as a hash.

    \b
    Example:
      logetl monitor keys create --user alice
    """
    from logetl.monitor.documents import LENGTHS, name_problem

    # the user owns the key's runs: a name as an owner is (at most this long, nothing that rewrites a line)
    why = name_problem("--user", user.strip(), LENGTHS["owner"])
    if why:
        raise UserError(why)
    store = _store(_db(ctx, db))
    click.echo(store.create_key(user.strip()))
    click.echo(f"this key is shown only now; runs sent with it belong to {user.strip()}", err=True)


@keys.command("list")
@_db_option
@click.pass_context
def keys_list(ctx, db):
    """List keys (prefix, user, created, revoked); the keys themselves cannot be shown.

    \b
    Example:
      logetl monitor keys list
    """
    import datetime as dt

    store = _store(_db(ctx, db))
    for k in store.list_keys():
        when = dt.datetime.fromtimestamp(k["created_at"], dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
        state = "revoked" if k["revoked_at"] else "active"
        click.echo(f"lgt_{k['prefix']}\t{k['user']}\t{when}\t{state}")


@keys.command("revoke")
@click.argument("prefix")
@_db_option
@click.pass_context
def keys_revoke(ctx, prefix, db):
    """Revoke a key by its prefix (as `keys list` shows it).

    \b
    Example:
      logetl monitor keys revoke lgt_1a2b3c4d
    """
    store = _store(_db(ctx, db))
    if not store.revoke_key(prefix):
        raise UserError(f"no active key {prefix!r}")
    click.echo(f"revoked {prefix}", err=True)


def _http_url(url: str) -> bool:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        return parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port or 1) > 0
    except ValueError:
        return False


@monitor.group()
def alerts():
    """Manage alert rules: a webhook is POSTed when a run of an application fails, has too many malformed
    lines, or writes too few records or runs too long against the median of its last successful runs.

    \b
    Examples:
      logetl monitor alerts add --application nightly --when failed --webhook http://hooks.example/logetl
      logetl monitor alerts add --application nightly --when records --threshold 0.5 --webhook URL
      logetl monitor alerts list
      logetl monitor alerts remove 3
    """


@alerts.command("add")
@click.option("--application", required=True, metavar="NAME", help="The application whose runs it watches.")
@click.option("--when", "kind", required=True, type=click.Choice(["failed", "malformed", "records", "duration"]),
              help="failed: the run failed; malformed: its malformed share is above the threshold (default "
                   "0.1); records: it wrote fewer than threshold x the median of the last N successful runs "
                   "(default 0.5); duration: it took longer than threshold x their median (default 2).")
@click.option("--threshold", type=float, default=None, metavar="X", help="See --when.")
@click.option("--last", type=int, default=None, metavar="N",
              help="How many earlier successful runs the median is of (records, duration; default 10).")
@click.option("--tag", default=None, metavar="KEY=VALUE", help="Only runs with this tag (or KEY: any value).")
@click.option("--owner", default=None, metavar="USER", help="Only this user's runs (default: everyone's).")
@click.option("--webhook", required=True, metavar="URL", help="Where the alert is POSTed, as JSON.")
@click.option("--webhook-allow", "webhook_allow", metavar="HOST", multiple=True,
              help="A webhook on the local network is refused unless this host, address or network (CIDR) "
                   "is allowed, as the server that delivers it must be started with (repeatable; also "
                   "$LOGETL_WEBHOOK_ALLOW, comma-separated).")
@_db_option
@click.pass_context
def alerts_add(ctx, application, kind, threshold, last, tag, owner, webhook, webhook_allow, db):
    """Add an alert rule; prints its id.

    A webhook at a local-network address (loopback, private, link-local) is refused, as the server's API
    refuses it, unless --webhook-allow allows it: the server delivers there only when started with the same
    --webhook-allow. A host name is resolved, and checked, when the alert is delivered.

    \b
    Example:
      logetl monitor alerts add --application nightly --when duration --threshold 3 --webhook URL
    """
    from logetl.monitor import alerts as alerting

    if owner is not None and not owner.strip():   # an unset shell variable: it must not mean everyone's runs
        raise UserError("--owner must not be empty: leave --owner out for a rule on everyone's runs")
    policy = _webhook_policy(webhook_allow)
    store = _store(_db(ctx, db))
    try:
        rule = alerting.add_rule(store, owner=owner, application=application, kind=kind, threshold=threshold,
                                 last=last, tag=tag, webhook=webhook, policy=policy)
    except alerting.RuleError as exc:
        # the message starts with the field: the option's name
        hint = " (and give --webhook-allow here to add the rule)" if str(exc).startswith("webhook: ") else ""
        raise UserError(f"--{exc}{hint}") from None
    click.echo(rule["id"])
    click.echo(f"alert rule {rule['id']}: {_describe_rule(rule)}", err=True)


def _describe_rule(r: dict) -> str:
    what = {"failed": "fails",
            "malformed": "has a malformed share above {threshold:g}",
            "records": "writes fewer than {threshold:g} x the median records of its last {last} successful runs",
            "duration": "takes longer than {threshold:g} x the median duration of its last {last} successful runs",
            }[r["when"]].format(**r)
    who = f" of {r['owner']}" if r["owner"] else ""
    tag = f" tagged {r['tag']}" if r["tag"] else ""
    return f"when a run{who} of {r['application']}{tag} {what}, POST to {r['webhook']}"


@alerts.command("list")
@_db_option
@click.pass_context
def alerts_list(ctx, db):
    """List alert rules: id, application, when, threshold, last, tag, owner, webhook (tab-separated).

    \b
    Example:
      logetl monitor alerts list
    """
    from logetl.monitor import alerts as alerting

    store = _store(_db(ctx, db))
    for r in alerting.list_rules(store):
        cells = [r["id"], r["application"], r["when"], "" if r["threshold"] is None else f"{r['threshold']:g}",
                 r["last"] or "", r["tag"] or "", r["owner"] or "", r["webhook"]]
        click.echo("\t".join(str(c) for c in cells))


@alerts.command("remove")
@click.argument("rule_id", metavar="ID")
@_db_option
@click.pass_context
def alerts_remove(ctx, rule_id, db):
    """Remove an alert rule by its id (as `alerts list` shows it); alerts it fired are kept.

    \b
    Example:
      logetl monitor alerts remove 3
    """
    from logetl.monitor import alerts as alerting

    store = _store(_db(ctx, db))
    number = alerting.rule_id_of(rule_id)
    if number is None or not alerting.remove_rule(store, number):
        raise UserError(f"no alert rule {rule_id!r}")
    click.echo(f"removed alert rule {rule_id}", err=True)


@monitor.command()
@click.option("--older-than", required=True, metavar="AGE", help="Prune runs started longer ago than AGE: "
              "90d, 12h, 2w, 30m.")
@click.option("--keep-last", type=click.IntRange(min=0), default=0, metavar="N",
              help="Keep the newest N runs of each application (and owner) whatever their age.")
@click.option("--dry-run", is_flag=True, help="Say what would be pruned; change nothing.")
@_db_option
@click.pass_context
def prune(ctx, older_than, keep_last, dry_run, db):
    """Delete old runs, keeping their daily sums (runs, failures, durations, records) per application, so
    trends survive.

    \b
    Examples:
      logetl monitor prune --older-than 90d --dry-run
      logetl monitor prune --older-than 90d --keep-last 20
    """
    from logetl.monitor import retention

    seconds = retention.parse_age(older_than)
    store = _store(_db(ctx, db))
    done = retention.prune(store, older_than=seconds, keep_last=keep_last, dry_run=dry_run)
    import datetime as dt

    cutoff = dt.datetime.fromtimestamp(done["cutoff"], dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
    kept = f"; {done['kept']:,} older run(s) kept by --keep-last {keep_last}" if keep_last else ""
    verb = "would prune" if dry_run else "pruned"
    click.echo(f"{verb} {done['runs']:,} run(s) of {done['applications']:,} application(s) started before "
               f"{cutoff} UTC{kept}")


if __name__ == "__main__":
    main()
