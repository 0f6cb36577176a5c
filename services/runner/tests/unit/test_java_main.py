"""Which Java class to run: read from the class files javac wrote (package, non-public class)."""

from __future__ import annotations

import pytest

from quiz_runner.languages import java_main, java_mains

MAIN = "([Ljava/lang/String;)V"
PUBLIC, STATIC = 0x0001, 0x0008


def u2(n: int) -> bytes:
    return n.to_bytes(2, "big")


def class_file(name: str, methods: list[tuple[int, str, str]]) -> bytes:
    """A minimal class file: a constant pool (with a long, which takes two entries), methods."""
    pool: list[bytes] = []

    def add(entry: bytes) -> int:
        """Its index: entries count from 1, longs and doubles count twice."""
        pool.append(entry)
        return sum(2 if e[0] in (5, 6) else 1 for e in pool[:-1]) + 1

    def utf8(text: str) -> int:
        return add(b"\x01" + u2(len(text)) + text.encode())

    def cls(binary: str) -> int:
        return add(b"\x07" + u2(utf8(binary)))

    add(b"\x05" + (42).to_bytes(8, "big"))  # a long constant: two pool entries
    this, parent = cls(name.replace(".", "/")), cls("java/lang/Object")
    code = utf8("Code")
    body = b""
    for flags, method, descriptor in methods:
        body += u2(flags) + u2(utf8(method)) + u2(utf8(descriptor))
        body += u2(1) + u2(code) + (2).to_bytes(4, "big") + b"\x00\x00"
    count = sum(2 if e[0] in (5, 6) else 1 for e in pool) + 1
    head = b"\xca\xfe\xba\xbe" + u2(0) + u2(61) + u2(count) + b"".join(pool)
    return head + u2(0x21) + u2(this) + u2(parent) + u2(0) + u2(0) + u2(len(methods)) + body


def test_a_main_in_a_package_is_found_by_its_binary_name() -> None:
    data = class_file("quiz.answers.Main", [(PUBLIC | STATIC, "main", MAIN)])
    assert java_main({"quiz/answers/Main.class": data}, "Main.java") == "quiz.answers.Main"


def test_the_class_declaring_main_runs_whatever_the_file_is_called() -> None:
    files = {
        "Solution.class": class_file("Solution", [(PUBLIC | STATIC, "main", MAIN)]),
        "Helper.class": class_file("Helper", [(STATIC, "help", "()V")]),
    }
    assert java_main(files, "Main.java") == "Solution"


def test_several_mains_pick_the_entry_file_then_the_top_level_class() -> None:
    both = {
        "Main.class": class_file("Main", [(PUBLIC | STATIC, "main", MAIN)]),
        "Other.class": class_file("Other", [(PUBLIC | STATIC, "main", MAIN)]),
    }
    assert java_main(both, "Main.java") == "Main"
    nested = {
        "A.class": class_file("A", [(PUBLIC | STATIC, "main", MAIN)]),
        "A$Test.class": class_file("A$Test", [(PUBLIC | STATIC, "main", MAIN)]),
    }
    assert java_main(nested, "Prog.java") == "A"
    with pytest.raises(ValueError, match="several classes declare main"):
        java_main(both, "Prog.java")


def test_what_to_change_when_nothing_can_run() -> None:
    with pytest.raises(ValueError, match="no class declares"):
        java_main({"Main.class": class_file("Main", [(PUBLIC, "run", "()V")])}, "Main.java")
    hidden = {"Main.class": class_file("Main", [(STATIC, "main", MAIN)])}
    with pytest.raises(ValueError, match="not `public static`"):
        java_main(hidden, "Main.java")
    # An instance main, or one with other parameters, is no entry point.
    other = class_file("Main", [(PUBLIC, "main", MAIN), (PUBLIC | STATIC, "main", "()V")])
    assert java_mains(other) == []


def test_what_is_not_a_class_file_declares_nothing() -> None:
    data = class_file("Main", [(PUBLIC | STATIC, "main", MAIN)])
    assert java_mains(b"not a class") == []
    assert java_mains(data[:40]) == []  # cut short
