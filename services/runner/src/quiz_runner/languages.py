"""Compile and run commands per language, as argument lists over the sandbox's fixed paths."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.runner import RunLanguage

# Paths inside every sandbox (both backends).
WORK_DIR = "/work"  # the case's fresh tmpfs; the job's files are bound read-only into it
BUILD_DIR = "/build"  # compile output: written by the compile step, read-only for cases
SOURCE_DIR = "/src"  # the job's files, read-only during compile
INIT_PATH = "/.quiz/init"  # quiz-runner-init (sandbox/runner_init.c)
TMP_DIR = "/tmp"  # noqa: S108 - the sandbox's own fresh tmpfs, not the host's
SANDBOX_PATH_ENV = "/usr/local/bin:/usr/bin:/bin"

_JAVA_CLASS = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")


@dataclass(frozen=True)
class Toolchain:
    """Host paths of the interpreters and compilers (the same paths exist in the docker image)."""

    python: str = "/usr/bin/python3"
    gcc: str = "/usr/bin/gcc"
    gxx: str = "/usr/bin/g++"
    node: str = "/usr/bin/node"
    java: str = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"
    javac: str = "/usr/lib/jvm/java-17-openjdk-amd64/bin/javac"

    def binaries(self, language: RunLanguage) -> list[str]:
        """The executables a language needs, to tell whether this host offers it."""
        return {
            RunLanguage.python: [self.python],
            RunLanguage.c: [self.gcc],
            RunLanguage.cpp: [self.gxx],
            RunLanguage.javascript: [self.node],
            RunLanguage.java: [self.java, self.javac],
        }[language]


@dataclass(frozen=True)
class Plan:
    """What to run for one language: the compile command (or None) and the case command."""

    language: RunLanguage
    compile: list[str] | None
    run: list[str]
    # Runtimes reserve address space and threads beyond the program's own needs: added to the
    # case's memory_mb (RLIMIT_AS) and processes (RLIMIT_NPROC) so the limits mean the program.
    extra_address_mb: int = 0
    extra_processes: int = 0


def parse_language(value: str) -> RunLanguage:
    """The language of a request, or `unsupported_language`."""
    try:
        return RunLanguage(value)
    except ValueError:
        offered = ", ".join(lang.value for lang in RunLanguage)
        raise ContractError(
            ErrorCode.unsupported_language, f"language {value!r} is not one of: {offered}"
        ) from None


def build_plan(
    language: RunLanguage, entry: str, sources: list[str], memory_mb: int, tools: Toolchain
) -> Plan:
    """Commands for `entry` (a path relative to the work dir) among the job's `sources`."""
    src = f"{SOURCE_DIR}/{entry}"
    if language is RunLanguage.python:
        # -E -s: no PYTHON* variables, no user site; -B: never write .pyc into the job.
        check = "import sys;compile(open(sys.argv[1],'rb').read(),sys.argv[1],'exec')"
        return Plan(
            language,
            compile=[tools.python, "-B", "-E", "-s", "-c", check, src],
            run=[tools.python, "-B", "-E", "-s", entry],
            extra_address_mb=64,
        )
    if language is RunLanguage.javascript:
        return Plan(
            language,
            compile=[tools.node, "--check", src],
            run=[tools.node, f"--max-old-space-size={memory_mb}", entry],
            # V8 reserves about 1 GiB of address space (pointer cage, code range) up front.
            extra_address_mb=1280,
            extra_processes=12,
        )
    if language in (RunLanguage.c, RunLanguage.cpp):
        suffixes = (".c",) if language is RunLanguage.c else (".cpp", ".cc", ".cxx")
        units = [f"{SOURCE_DIR}/{s}" for s in sources if s.endswith(suffixes)]
        if src not in units:
            units.insert(0, src)
        compiler = tools.gcc if language is RunLanguage.c else tools.gxx
        std = "-std=gnu17" if language is RunLanguage.c else "-std=gnu++17"
        return Plan(
            language,
            compile=[compiler, std, "-O2", "-pipe", "-o", f"{BUILD_DIR}/main", *units, "-lm"],
            run=[f"{BUILD_DIR}/main"],
        )
    # Java: the entry file names the public class.
    cls = PurePosixPath(entry).stem
    if not _JAVA_CLASS.match(cls) or not entry.endswith(".java"):
        raise ContractError(ErrorCode.invalid_request, "java entry must be <Class>.java")
    units = [f"{SOURCE_DIR}/{s}" for s in sources if s.endswith(".java")]
    jvm = [
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:-UsePerfData",
        "-Xss8m",
        # The JVM reserves 1 GiB of class space and 240 MiB of code cache by default.
        "-XX:CompressedClassSpaceSize=64m",
        "-XX:MaxMetaspaceSize=128m",
        "-XX:ReservedCodeCacheSize=32m",
    ]
    return Plan(
        language,
        compile=[
            tools.javac,
            "-J-Xmx512m",
            *(f"-J{flag}" for flag in jvm),
            "-encoding",
            "UTF-8",
            "-d",
            BUILD_DIR,
            *units,
        ],
        run=[tools.java, f"-Xmx{memory_mb}m", *jvm, "-cp", BUILD_DIR, cls],
        extra_address_mb=1024,
        extra_processes=24,
    )


_SAFE_PATH = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")


def check_file_path(path: str) -> str:
    """A job file path that cannot leave the work dir, or `invalid_request`."""
    parts = path.split("/")
    if not _SAFE_PATH.match(path) or any(p in (".", "..") for p in parts) or len(path) > 200:
        raise ContractError(ErrorCode.invalid_request, f"bad file path {path!r}")
    return path
