"""Every language compiles once and runs N cases; compile errors; codeimage pictures."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from quiz_contracts.runner import PictureSpec, RunCase, RunFile, RunLimits, RunRequest
from quiz_runner.pictures import pixels_sha256
from quiz_runner.service import RunnerService

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("no_leftovers")]

ECHO = {
    "python": ("main.py", "import sys\nprint(sys.argv[1], sys.stdin.read().strip())\n"),
    "c": (
        "main.c",
        "#include <stdio.h>\nint main(int c,char**v){char b[64]={0};"
        "if(!fgets(b,64,stdin))b[0]=0;for(char*p=b;*p;p++)if(*p==10)*p=0;"
        'printf("%s %s\\n",v[1],b);return 0;}\n',
    ),
    "cpp": (
        "main.cpp",
        "#include <iostream>\n#include <string>\nint main(int c,char**v){std::string s;"
        'std::getline(std::cin,s);std::cout<<v[1]<<" "<<s<<"\\n";}\n',
    ),
    "javascript": (
        "main.js",
        "const s=require('fs').readFileSync(0,'utf8').trim();console.log(process.argv[2]+' '+s)\n",
    ),
    "java": (
        "Main.java",
        "import java.util.*;public class Main{public static void main(String[] a){"
        'Scanner s=new Scanner(System.in);System.out.println(a[0]+" "+s.nextLine());}}\n',
    ),
}
LIMITS = RunLimits(cpu_s=5, wall_s=10, memory_mb=256, processes=16)


@pytest.mark.parametrize("language", list(ECHO))
async def test_compile_once_run_many(runner: RunnerService, language: str) -> None:
    path, source = ECHO[language]
    cases = [RunCase(name=f"c{i}", stdin=f"in{i}\n", args=[f"arg{i}"]) for i in range(3)]
    reply = await runner.run(
        RunRequest(
            language=language,
            files=[RunFile(path=path, content=source)],
            cases=cases,
            limits=LIMITS,
        )
    )
    assert reply.compile.ok, reply.compile.output
    assert [c.stdout for c in reply.cases] == [f"arg{i} in{i}\n" for i in range(3)], reply
    assert all(c.exit_code == 0 and c.completed for c in reply.cases)


@pytest.mark.parametrize(
    ("language", "path", "source", "needle"),
    [
        ("c", "main.c", "int main(){ return x; }", "error"),
        ("cpp", "main.cpp", "int main(){ undefined(); }", "error"),
        ("python", "main.py", "print(", "SyntaxError"),
        ("javascript", "main.js", "let = ;", "SyntaxError"),
    ],
)
async def test_compile_failed_is_a_reply_state(
    runner: RunnerService, language: str, path: str, source: str, needle: str
) -> None:
    reply = await runner.run(
        RunRequest(
            language=language,
            files=[RunFile(path=path, content=source)],
            cases=[RunCase(name="a")],
        )
    )
    assert not reply.compile.ok and needle in reply.compile.output
    assert reply.cases == []


async def test_extra_files_are_readable_in_the_work_dir(runner: RunnerService) -> None:
    reply = await runner.run(
        RunRequest(
            language="python",
            files=[
                RunFile(path="main.py", content="import helper\nprint(open('data/in.txt').read())"),
                RunFile(path="helper.py", content="print('helper')"),
                RunFile(path="data/in.txt", content="data!"),
            ],
            cases=[RunCase(name="a")],
        )
    )
    assert reply.cases[0].stdout == "helper\ndata!\n"


DRAW = """
import sys
w, h = 4, 3
sys.stdout.buffer.write(b"P6 %d %d 255\\n" % (w, h))
sys.stdout.buffer.write(b"".join(bytes([x * 60, y * 100, 7]) for y in range(h) for x in range(w)))
"""


def expected_pixels() -> bytes:
    return b"".join(bytes([x * 60, y * 100, 7]) for y in range(3) for x in range(4))


async def test_picture_on_stdout(runner: RunnerService) -> None:
    reply = await runner.run(
        RunRequest(
            language="python",
            files=[RunFile(path="main.py", content=DRAW)],
            picture=PictureSpec(width=4, height=3),
        )
    )
    pic = reply.picture
    assert pic is not None and (pic.missing_pixels, pic.invalid_pixels) == (0, 0)
    assert [c.name for c in reply.cases] == ["picture"] and reply.cases[0].stdout == ""
    image = Image.open(io.BytesIO(base64.b64decode(pic.data)))
    assert image.size == (4, 3) and image.tobytes() == expected_pixels()
    assert pic.sha256 == pixels_sha256(4, 3, expected_pixels())


async def test_picture_in_a_file_with_missing_pixels(runner: RunnerService) -> None:
    src = "open('out.ppm','wb').write(b'P3 2 2 255 255 0 0 0 255 0 0 0 999')\nprint('drawn')\n"
    reply = await runner.run(
        RunRequest(
            language="python",
            files=[RunFile(path="main.py", content=src)],
            picture=PictureSpec(width=2, height=2, source="file", path="out.ppm"),
        )
    )
    pic = reply.picture
    assert pic is not None and reply.cases[0].stdout == "drawn\n"
    assert (pic.missing_pixels, pic.invalid_pixels) == (1, 1)


async def test_picture_in_c(runner: RunnerService) -> None:
    src = (
        '#include <stdio.h>\nint main(){printf("P6 2 1 255\\n");'
        "putchar(255);putchar(0);putchar(0);putchar(0);putchar(0);putchar(255);}\n"
    )
    reply = await runner.run(
        RunRequest(
            language="c",
            files=[RunFile(path="main.c", content=src)],
            picture=PictureSpec(width=2, height=1),
        )
    )
    assert reply.picture is not None
    assert reply.picture.sha256 == pixels_sha256(2, 1, bytes([255, 0, 0, 0, 0, 255]))
