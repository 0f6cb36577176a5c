"""Every language compiles once and runs N cases; compile errors; codeimage pictures."""

from __future__ import annotations

import pytest

from quiz_contracts.runner import PictureSpec, RunCase, RunFile, RunLimits, RunRequest
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


# A 4 × 3 color16 picture, one row a line: pixel (x, y) is (x + 4y) % 16.
DRAW = """
w, h = 4, 3
for y in range(h):
    print(" ".join(str((x + 4 * y) % 16) for x in range(w)))
"""


async def test_picture_on_stdout(runner: RunnerService) -> None:
    reply = await runner.run(
        RunRequest(
            language="python",
            files=[RunFile(path="main.py", content=DRAW)],
            picture=PictureSpec(width=4, height=3, palette="color16"),
        )
    )
    pic = reply.picture
    assert pic is not None and pic.complete, pic
    assert [c.name for c in reply.cases] == ["image"] and reply.cases[0].stdout == ""
    assert (pic.width, pic.height, pic.palette) == (4, 3, "color16")
    assert pic.pixels == "0123456789ab"


async def test_picture_in_a_file_with_missing_and_invalid_pixels(runner: RunnerService) -> None:
    src = "open('out.txt','w').write('255 0\\n999')\nprint('drawn')\n"
    reply = await runner.run(
        RunRequest(
            language="python",
            files=[RunFile(path="main.py", content=src)],
            picture=PictureSpec(
                width=2, height=2, palette="gray256", source="file", path="out.txt"
            ),
        )
    )
    pic = reply.picture
    assert pic is not None and reply.cases[0].stdout == "drawn\n"
    assert (pic.missing_pixels, pic.invalid_pixels) == (1, 1)
    assert pic.pixels == "ff00xxxx" and not pic.complete


async def test_picture_in_c(runner: RunnerService) -> None:
    src = (
        "#include <stdio.h>\nint main(){for(int y=0;y<3;y++){for(int x=0;x<3;x++)"
        'printf("%d ",!(x==1&&y==1));printf("\\n");}}\n'
    )
    reply = await runner.run(
        RunRequest(
            language="c",
            files=[RunFile(path="main.c", content=src)],
            picture=PictureSpec(width=3, height=3, palette="bw"),
        )
    )
    assert reply.picture is not None
    assert reply.picture.pixels == "111101111" and reply.picture.complete
