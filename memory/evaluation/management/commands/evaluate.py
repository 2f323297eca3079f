"""manage.py evaluate: play the versioned scenario suite against fresh, isolated tenants and report.

    manage.py evaluate [--profile fast|full] [--scenario NAME ...] [--json PATH] [--html PATH] [--keep]
                       [--suite DIR] [--no-worker]
    manage.py evaluate --via-api http://127.0.0.1:8000 --api-key egk_… [--api-key-b egk_…]

Exit status 0 when the suite passes; 1 when a must-be-1.0 metric (isolation, staleness, deletion) is
below 1.0, another metric misses the threshold in memory/evaluation/scenarios/suite.yaml, or an
adversarial case fails; 2 when the run could not start (unknown scenario, no suite.yaml, no API key,
server unreachable).
Metric definitions: docs/evaluation.md.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from memory.evaluation.evaluate import run_evaluation
from memory.evaluation.realm import ApiRealm, InProcessRealm, Realm
from memory.evaluation.report import print_table, write_html, write_json
from memory.evaluation.suite import SCENARIO_DIR, SuiteError, load_suite

FAILED, UNUSABLE = 1, 2  # exit codes: the suite failed / the run could not start


class Command(BaseCommand):
    help = "Measure the memory system on the scenario suite (metrics + adversarial cases)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--profile", choices=["fast", "full"], default="fast")
        parser.add_argument("--scenario", action="append", dest="scenarios", metavar="NAME",
                            help="Run only these scenarios (repeatable).")
        parser.add_argument("--json", dest="json_path", metavar="PATH", help="Write the report as JSON.")
        parser.add_argument("--html", dest="html_path", metavar="PATH", help="Write the HTML report.")
        parser.add_argument("--keep", action="store_true", help="Keep the run's tenants/subjects afterwards.")
        parser.add_argument("--via-api", metavar="URL", help="Drive the HTTP API of a running server instead.")
        parser.add_argument("--api-key", default=os.environ.get("ENGRAM_EVAL_KEY"),
                            help="--via-api: agent key with read, write, propose and mint (env ENGRAM_EVAL_KEY).")
        parser.add_argument("--api-key-b", default=os.environ.get("ENGRAM_EVAL_KEY_B"),
                            help="--via-api: a mint key of a second tenant, for cross-tenant probes "
                                 "(env ENGRAM_EVAL_KEY_B).")
        parser.add_argument("--no-fail", action="store_true", help="Exit 0 even when the suite fails.")
        parser.add_argument("--suite", dest="suite_dir", metavar="DIR",
                            help="Another scenario directory with its own suite.yaml (default: the versioned "
                                 "suite in memory/evaluation/scenarios).")
        parser.add_argument("--no-worker", action="store_true",
                            help="In process: don't start the real qcluster worker the deletion race hands its "
                                 "last job to (saves about 10 s; the rest of the race still runs).")

    def handle(self, *args: Any, **options: Any) -> None:
        directory = Path(options["suite_dir"]) if options["suite_dir"] else SCENARIO_DIR
        if not (directory / "suite.yaml").is_file():
            raise CommandError(f"{directory} holds no suite.yaml.", returncode=UNUSABLE)
        try:
            suite = load_suite(options["profile"], names=options["scenarios"], directory=directory)
        except SuiteError as exc:
            raise CommandError(str(exc), returncode=UNUSABLE) from exc
        realm: Realm
        if options["via_api"]:
            if not options["api_key"]:
                raise CommandError("--via-api needs --api-key (or ENGRAM_EVAL_KEY) with read/write/propose/mint.",
                                   returncode=UNUSABLE)
            try:
                realm = ApiRealm(options["via_api"], options["api_key"], options["api_key_b"])
            except (RuntimeError, OSError) as exc:  # URLError is an OSError
                raise CommandError(f"{options['via_api']}: {exc}", returncode=UNUSABLE) from exc
            mode = f"via-api {options['via_api']}"
        else:
            # A fresh clone may not have migrated yet (the evaluation creates its own tenants, but needs
            # the schema and the cache table the deletion fan-out purges). Only when something is unapplied:
            # post_migrate handlers would otherwise run (and lock) on every evaluation.
            if _unapplied_migrations():
                call_command("migrate", interactive=False, verbosity=0)
            call_command("createcachetable", verbosity=0)  # idempotent; also mends a dropped cache table
            realm = InProcessRealm()
            mode = "in-process"
        # The run makes many deliberate 4xx requests and inline tasks; their log lines would bury the table.
        quiet = {name: logging.getLogger(name).level for name in ("django.request", "django-q")}
        for name in quiet:
            logging.getLogger(name).setLevel(logging.ERROR)
        try:
            self._run(realm, suite, mode, options)
        finally:
            for name, level in quiet.items():
                logging.getLogger(name).setLevel(level)

    def _run(self, realm: Any, suite: Any, mode: str, options: dict[str, Any]) -> None:
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        console = Console(file=self.stdout, force_terminal=False, width=160)  # type: ignore[arg-type]
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                      console=console, transient=True) as bar:
            task = bar.add_task("starting", total=None)
            report = run_evaluation(realm=realm, suite=suite, profile=options["profile"], mode=mode,
                                    keep=options["keep"], worker=not options["no_worker"],
                                    progress=lambda message: bar.update(task, description=message))
        print_table(report, console)
        if options["json_path"]:
            write_json(report, Path(options["json_path"]))
            console.print(f"JSON report: {options['json_path']}")
        if options["html_path"]:
            write_html(report, Path(options["html_path"]))
            console.print(f"HTML report: {options['html_path']}")
        if not report.ok and not options["no_fail"]:
            raise CommandError("The evaluation failed: see the failing metrics and cases above.", returncode=FAILED)


def _unapplied_migrations() -> bool:
    executor = MigrationExecutor(connection)
    return bool(executor.migration_plan(executor.loader.graph.leaf_nodes()))
