"""Compile and run commands per language, as argument lists over the sandbox's fixed paths."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.runner import RunLanguage

# Paths inside every sandbox (both backends).
WORK_DIR = "/work"  # the case's fresh tmpfs; the job's files are bound read-only into it
BUILD_DIR = "/build"  # compile output: written by the compile step, read-only for cases
SOURCE_DIR = "/src"  # the job's files, read-only during compile
INIT_PATH = "/.quiz/init"  # quiz-runner-init in the docker image (bwrap execs it from an fd)
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
    # RLIMIT_DATA = memory_mb + this, when set: the runtime's own writable memory (JavaScript:
    # Node's start-up and its thread pool's stacks), so what the program maps outside a heap
    # limit (Node's Buffers) is bounded by memory_mb as well.
    extra_data_mb: int | None = None
    # Whether a peak RSS near memory_mb means the limit stopped the program (native code and
    # Python, whose address space is the budget) or not (a JVM or V8 heap limit does, and says so).
    judge_rss: bool = True


def parse_language(value: str) -> RunLanguage:
    """The language of a request, or `unsupported_language`."""
    try:
        return RunLanguage(value)
    except ValueError:
        offered = ", ".join(lang.value for lang in RunLanguage)
        raise ContractError(
            ErrorCode.unsupported_language, f"language {value!r} is not one of: {offered}"
        ) from None


NODE_EXTRA_DATA_MB = 96


def v8_heap_flags(memory_mb: int) -> list[str]:
    """V8's heap sized from memory_mb: the young generation (3 semi-spaces) plus the old space.

    The semi-spaces take 1/16 of it (1 to 16 MiB, V8's default at 256 MiB and more), the old
    space the rest. A program that allocates past it ends with "JavaScript heap out of memory".
    Buffers and typed arrays live outside V8's heap: RLIMIT_DATA (memory_mb +
    NODE_EXTRA_DATA_MB) bounds those, and they fail with "Array buffer allocation failed".
    """
    semi = max(1, min(16, memory_mb // 16))
    return [f"--max-semi-space-size={semi}", f"--max-old-space-size={memory_mb - 3 * semi}"]


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
            # The syntax check needs no site (-S: no site-packages scan, ~3 ms of the ~9 a
            # python3 start costs here); -I also drops the cwd from sys.path.
            compile=[tools.python, "-B", "-I", "-S", "-c", check, src],
            run=[tools.python, "-B", "-E", "-s", entry],
            extra_address_mb=64,
        )
    if language is RunLanguage.javascript:
        return Plan(
            language,
            compile=[tools.node, "--check", src],
            run=[tools.node, *v8_heap_flags(memory_mb), entry],
            # V8 reserves about 1 GiB of address space (pointer cage, code range) up front.
            extra_address_mb=1280,
            # Node maps ~48 MiB of data at start and +32 MiB of stacks once the libuv pool runs
            # (measured, Node 20): RLIMIT_DATA = memory_mb + 96 bounds heap and Buffers together.
            extra_data_mb=NODE_EXTRA_DATA_MB,
            extra_processes=12,
            judge_rss=False,
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
    # Java: the class to run is the one that declares main, found once compiled (java_main);
    # until then the entry file's name stands for it.
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
        # The heap is the program's memory: -Xmx is memory_mb, so a program that allocates
        # past it gets an OutOfMemoryError, and the JVM's own footprint is not counted.
        run=[tools.java, f"-Xmx{memory_mb}m", *jvm, "-cp", BUILD_DIR, cls],
        extra_address_mb=1024,
        extra_processes=24,
        judge_rss=False,
    )


def with_main_class(plan: Plan, main_class: str) -> Plan:
    """The Java plan running `main_class` (a binary name, `pkg.Outer$Inner`)."""
    return replace(plan, run=[*plan.run[:-1], main_class])


_SAFE_PATH = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")


def check_file_path(path: str) -> str:
    """A job file path that cannot leave the work dir, or `invalid_request`."""
    parts = path.split("/")
    if not _SAFE_PATH.match(path) or any(p in (".", "..") for p in parts) or len(path) > 200:
        raise ContractError(ErrorCode.invalid_request, f"bad file path {path!r}")
    return path


# ---- Java: which class declares main, read from the compiled class files ----

_JAVA_MAIN_DESCRIPTOR = b"([Ljava/lang/String;)V"
_ACC_PUBLIC, _ACC_STATIC = 0x0001, 0x0008
# Constant pool entries after their tag byte: fixed sizes, Utf8 aside (u2 length + bytes).
_CP_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2}
_CP_SIZES.update({17: 4, 18: 4, 19: 2, 20: 2})


@dataclass(frozen=True)
class JavaMain:
    """A class of the build declaring `static void main(String[])`."""

    binary_name: str  # pkg.Outer$Inner, what `java` takes
    public_static: bool  # `public static`: the launcher can run it


def java_mains(data: bytes) -> list[JavaMain]:
    """The main method a class file declares (zero or one), or [] for what is not one."""
    try:
        return _java_mains(data)
    except (IndexError, ValueError, KeyError):
        return []


def _java_mains(data: bytes) -> list[JavaMain]:
    def u2(at: int) -> int:
        return int.from_bytes(data[at : at + 2], "big")

    def u4(at: int) -> int:
        return int.from_bytes(data[at : at + 4], "big")

    if data[:4] != b"\xca\xfe\xba\xbe":
        return []
    count, at = u2(8), 10
    utf8: dict[int, bytes] = {}
    classes: dict[int, int] = {}
    index = 1
    while index < count:
        tag = data[at]
        if tag == 1:
            length = u2(at + 1)
            utf8[index] = data[at + 3 : at + 3 + length]
            at += 3 + length
        else:
            if tag == 7:
                classes[index] = u2(at + 1)
            at += 1 + _CP_SIZES[tag]
        index += 2 if tag in (5, 6) else 1  # longs and doubles take two entries
    this_class = u2(at + 2)
    name = utf8[classes[this_class]].decode("utf-8").replace("/", ".")
    at += 6
    at += 2 + 2 * u2(at)  # interfaces
    for members in ("fields", "methods"):
        found = []
        n, at = u2(at), at + 2
        for _ in range(n):
            flags, member, descriptor, attributes = u2(at), u2(at + 2), u2(at + 4), u2(at + 6)
            at += 8
            for _ in range(attributes):
                at += 6 + u4(at + 2)
            if (
                members == "methods"
                and utf8.get(member) == b"main"
                and utf8.get(descriptor) == _JAVA_MAIN_DESCRIPTOR
                and flags & _ACC_STATIC
            ):
                both = _ACC_PUBLIC | _ACC_STATIC
                found.append(JavaMain(name, flags & both == both))
        if members == "methods":
            return found
    return []


def java_main(class_files: dict[str, bytes], entry: str) -> str:
    """The class to run: the one declaring `public static void main(String[] args)`.

    With several, the one named like the entry file (in any package), else the top-level one.
    Raises ValueError with what to change when there is none, or no way to choose.
    """
    mains = [m for data in class_files.values() for m in java_mains(data)]
    runnable = sorted(m.binary_name for m in mains if m.public_static)
    if not runnable:
        if mains:
            raise ValueError(
                f"main in {mains[0].binary_name} is not `public static`: declare it "
                "`public static void main(String[] args)`"
            )
        raise ValueError(
            "no class declares `public static void main(String[] args)`: add one to the "
            f"class of {entry}"
        )
    if len(runnable) == 1:
        return runnable[0]
    stem = PurePosixPath(entry).stem
    named = [n for n in runnable if n.rsplit(".", 1)[-1] == stem]
    top_level = [n for n in runnable if "$" not in n]
    for choice in (named, top_level):
        if len(choice) == 1:
            return choice[0]
    raise ValueError(
        f"several classes declare main ({', '.join(runnable)}): name the entry file after the "
        "one to run"
    )
