"""Every language compiles once and runs N cases; compile errors; codeimage pictures."""

from __future__ import annotations

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.runner import (
    MEMORY_FLOOR_MB,
    PictureSpec,
    RunCase,
    RunFile,
    RunLimits,
    RunRequest,
)
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


# Keeps `argv[1]` MiB alive, allocated 1 MiB at a time the way the language usually allocates.
ALLOCATE = {
    "python": (
        "main.py",
        "import sys\nkeep = [bytearray(b'x' * 1048576) for _ in range(int(sys.argv[1]))]\n"
        "print('kept', len(keep))\n",
    ),
    "c": (
        "main.c",
        "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
        "int main(int c,char**v){int n=atoi(v[1]);for(int i=0;i<n;i++){char*p=malloc(1<<20);"
        'if(!p){perror("malloc");return 1;}memset(p,1,1<<20);}printf("kept %d\\n",n);}\n',
    ),
    "cpp": (
        "main.cpp",
        "#include <iostream>\n#include <vector>\n#include <cstdlib>\n"
        "int main(int c,char**v){int n=std::atoi(v[1]);std::vector<std::vector<char>> k;"
        'for(int i=0;i<n;i++)k.emplace_back(1<<20,1);std::cout<<"kept "<<n<<"\\n";}\n',
    ),
    "javascript": (
        "main.js",
        "const n = +process.argv[2]; const keep = [];\n"
        "for (let i = 0; i < n; i++) keep.push(new Array(131072).fill(1.5));\n"
        "console.log('kept ' + keep.length);\n",
    ),
    "java": (
        "Main.java",
        "import java.util.*;public class Main{public static void main(String[] a){"
        "int n=Integer.parseInt(a[0]);List<byte[]> k=new ArrayList<>();"
        'for(int i=0;i<n;i++)k.add(new byte[1<<20]);System.out.println("kept "+k.size());}}\n',
    ),
}


@pytest.mark.parametrize("language", list(ALLOCATE))
async def test_memory_is_judged_by_what_the_program_did(
    runner: RunnerService, language: str
) -> None:
    """Under 64 MiB: hello and 32 MiB complete (whatever the runtime's own footprint), 128 MiB
    is stopped and memory_exceeded; at the language's floor hello completes, under it the
    request is refused."""
    path, source = ALLOCATE[language]
    files = [RunFile(path=path, content=source)]
    limits = RunLimits(memory_mb=64, cpu_s=10, wall_s=20)
    cases = [RunCase(name=f"{mb} MiB", args=[str(mb)]) for mb in (0, 32, 128)]
    reply = await runner.run(RunRequest(language=language, files=files, cases=cases, limits=limits))
    assert reply.compile.ok, reply.compile.output
    hello, half, over = reply.cases
    for case, kept in ((hello, 0), (half, 32)):
        assert case.completed and case.stdout == f"kept {kept}\n", case
    assert over.memory_exceeded and not over.completed and over.stdout == "", over
    floor = MEMORY_FLOOR_MB[language]
    at_floor = await runner.run(
        RunRequest(
            language=language,
            files=files,
            cases=[RunCase(name="hello", args=["0"])],
            limits=limits.model_copy(update={"memory_mb": floor}),
        )
    )
    assert at_floor.cases[0].completed and at_floor.cases[0].stdout == "kept 0\n"
    with pytest.raises(ContractError) as err:
        await runner.run(
            RunRequest(
                language=language,
                files=files,
                cases=[RunCase(name="hello", args=["0"])],
                limits=limits.model_copy(update={"memory_mb": floor - 1}),
            )
        )
    assert err.value.code is ErrorCode.limit_exceeded and "floor" in err.value.message


JAVA_ENTRIES = {
    "a package line": (
        "Main.java",
        "package quiz.answers;\npublic class Main { public static void main(String[] a) {"
        ' System.out.println("from a package"); } }\n',
        "from a package\n",
    ),
    "main in a class that is not public": (
        "Main.java",
        "class Solution { public static void main(String[] a) {"
        ' System.out.println("not public"); } }\n',
        "not public\n",
    ),
    "main beside helper classes": (
        "Prog.java",
        'class Helper { static String hi() { return "helped"; } }\n'
        "public class Prog { public static void main(String[] a) {"
        " System.out.println(Helper.hi()); } }\n",
        "helped\n",
    ),
}


@pytest.mark.parametrize("shape", list(JAVA_ENTRIES))
async def test_java_runs_the_class_that_declares_main(runner: RunnerService, shape: str) -> None:
    path, source, expected = JAVA_ENTRIES[shape]
    reply = await runner.run(
        RunRequest(
            language="java",
            files=[RunFile(path=path, content=source)],
            cases=[RunCase(name="a"), RunCase(name="b")],
            limits=LIMITS,
        )
    )
    assert reply.compile.ok, reply.compile.output
    assert [c.stdout for c in reply.cases] == [expected, expected], reply.cases


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("public class Main { static void run() {} }\n", "no class declares"),
        ("public class Main { static void main(String[] a) {} }\n", "is not `public static`"),
    ],
)
async def test_java_without_a_runnable_main_is_compile_failed(
    runner: RunnerService, source: str, says: str
) -> None:
    """It compiles, but nothing could run: compile_failed saying what to change, no case run."""
    reply = await runner.run(
        RunRequest(
            language="java",
            files=[RunFile(path="Main.java", content=source)],
            cases=[RunCase(name="a")],
            limits=LIMITS,
        )
    )
    assert not reply.compile.ok and says in reply.compile.output, reply.compile
    assert "public static void main(String[] args)" in reply.compile.output
    assert reply.cases == []
