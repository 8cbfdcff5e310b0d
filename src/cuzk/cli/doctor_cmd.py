"""`cuzk doctor`: check this machine against the daemon's configuration before it starts, or plan a box
described with --box (`cuzk.daemon.doctor`). Exit 0 all good, 1 warnings, 2 something cannot work."""

from __future__ import annotations

import argparse
import json

from cuzk.cli.config_cmd import add_config_argument, resolve_config


def register(sub: argparse._SubParsersAction) -> None:
    doctor = sub.add_parser("doctor", help="check this machine and the configuration before the daemon starts; "
                                           "plan a described box with --box")
    add_config_argument(doctor)
    doctor.add_argument("--box", metavar="SPEC",
                        help="plan for this machine instead of probing the one here: GPU groups NxSIZE, the host "
                             "memory and the cores, e.g. \"4x24GiB,256GiB,32cores\"")
    doctor.add_argument("--circuit", action="append", default=[], metavar="ID",
                        help="check and plan this circuit (repeatable; default: srs.preload, else porep-32g, "
                             "wpost-32g, winning-32g and snap-32g)")
    doctor.add_argument("--json", action="store_true", help="print JSON instead of text")
    doctor.set_defaults(handler=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    from cuzk.backends.cuda.plan import format_gib
    from cuzk.daemon.doctor import diagnose, parse_box

    config = resolve_config(args.config)
    box = parse_box(args.box) if args.box else None
    report = diagnose(config, box=box, circuits=args.circuit)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return report.exit_status
    print(f"cuzk doctor: {'--box ' + args.box if box else 'this machine'}, config {config.source or 'defaults'}")
    print(f"box: {report.box.text()}")
    for finding in report.findings:
        print(finding.line())
    if report.plans:
        print("plans (per device and key; pinned = host memory that device process pins for the key):")
        for p in report.plans:
            if p.mode in ("refused", "cpu"):
                detail = p.why
            else:
                kept = "all" if len(p.resident) == 5 else ", ".join(p.resident) or "nothing"
                batch = "whole" if p.batch is None else f"2^{p.batch.bit_length() - 1}"
                detail = (f"resident {kept}, MSM batch {batch}, device {format_gib(p.device_bytes)}, "
                          f"streamed {format_gib(p.streamed_bytes)}/proof, pinned {format_gib(p.pinned_bytes)}")
            budget = f" of {format_gib(p.budget)}" if p.mode != "cpu" else ""
            beside = f" beside {', '.join(p.beside)}" if p.beside and p.mode != "refused" else ""
            print(f"  {p.circuit_id:<12} {p.device:<8} {p.mode}{budget}{beside}: {detail}")
    print("verdicts:")
    for v in report.verdicts:
        print(f"  {v.level.upper():<8}{v.circuit_id}: {v.message}" + (f" -> fix: {v.fix}" if v.fix else ""))
    errors = sum(f.level == "error" for f in report.findings) + sum(v.level == "error" for v in report.verdicts)
    warnings = sum(f.level == "warning" for f in report.findings) + sum(v.level == "warning" for v in report.verdicts)
    print(f"{errors} error(s), {warnings} warning(s): exit {report.exit_status}")
    return report.exit_status
