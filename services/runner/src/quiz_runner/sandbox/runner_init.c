/* quiz-runner-init: the first program inside every sandbox (bwrap and docker alike).
 *
 * It sets the rlimits of the case on a child, runs the program, waits for it and reports how it
 * ended ("exit N" or "signal N", its CPU time and peak RSS) on a status channel the program
 * cannot forge through its own stdout. Then (--reap, non-root only) it kills whatever the program
 * left behind and, when
 * asked, copies one regular file (never a symlink) of the work dir to a collect channel.
 * Usage: quiz-runner-init [--cpu S] [--as B] [--nproc N] [--fsize B] [--nofile N]
 *          [--reap] [--status FD|PATH] [--collect SRC --collect-out FD|PATH --collect-max B] -- PROG ARGS...
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static int open_out(const char *spec) {
    if (!spec) return -1;
    char *end;
    long fd = strtol(spec, &end, 10);
    if (*spec && *end == '\0') return (int)fd;
    /* A path inside a directory the program may also write: never follow its symlinks. */
    return open(spec, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
}

static void set_limit(int resource, rlim_t soft, rlim_t hard) {
    struct rlimit rl = {soft, hard};
    if (setrlimit(resource, &rl) != 0) {
        perror("quiz-runner-init: setrlimit");
        _exit(126);
    }
}

int main(int argc, char **argv) {
    long long cpu = 0, as = 0, nproc = 0, fsize = -1, nofile = 64, collect_max = 0;
    const char *status_spec = NULL, *collect = NULL, *collect_spec = NULL;
    int reap = 0;
    int i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) { i++; break; }
        if (strcmp(argv[i], "--reap") == 0) { reap = 1; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "quiz-runner-init: bad arguments\n"); return 125; }
        const char *k = argv[i], *v = argv[++i];
        if (!strcmp(k, "--cpu")) cpu = atoll(v);
        else if (!strcmp(k, "--as")) as = atoll(v);
        else if (!strcmp(k, "--nproc")) nproc = atoll(v);
        else if (!strcmp(k, "--fsize")) fsize = atoll(v);
        else if (!strcmp(k, "--nofile")) nofile = atoll(v);
        else if (!strcmp(k, "--status")) status_spec = v;
        else if (!strcmp(k, "--collect")) collect = v;
        else if (!strcmp(k, "--collect-out")) collect_spec = v;
        else if (!strcmp(k, "--collect-max")) collect_max = atoll(v);
        else { fprintf(stderr, "quiz-runner-init: unknown option %s\n", k); return 125; }
    }
    if (i >= argc) { fprintf(stderr, "quiz-runner-init: no program\n"); return 125; }
    int status_fd = open_out(status_spec);
    int collect_fd = collect ? open_out(collect_spec) : -1;
    /* The program must not inherit the report channels. */
    if (status_fd >= 0) fcntl(status_fd, F_SETFD, FD_CLOEXEC);
    if (collect_fd >= 0) fcntl(collect_fd, F_SETFD, FD_CLOEXEC);
    signal(SIGPIPE, SIG_IGN);

    pid_t pid = fork();
    if (pid < 0) { perror("quiz-runner-init: fork"); return 125; }
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        set_limit(RLIMIT_CORE, 0, 0);
        if (cpu > 0) set_limit(RLIMIT_CPU, (rlim_t)cpu, (rlim_t)cpu + 1);
        if (as > 0) set_limit(RLIMIT_AS, (rlim_t)as, (rlim_t)as);
        if (nproc > 0) set_limit(RLIMIT_NPROC, (rlim_t)nproc, (rlim_t)nproc);
        if (fsize >= 0) set_limit(RLIMIT_FSIZE, (rlim_t)fsize, (rlim_t)fsize);
        if (nofile > 0) set_limit(RLIMIT_NOFILE, (rlim_t)nofile, (rlim_t)nofile);
        set_limit(RLIMIT_MEMLOCK, 0, 0);
        set_limit(RLIMIT_MSGQUEUE, 0, 0);
        execv(argv[i], &argv[i]);
        fprintf(stderr, "quiz-runner-init: cannot run %s: %s\n", argv[i], strerror(errno));
        _exit(127);
    }
    /* The program runs as our uid: keep it out of /proc/<us>/fd, where the report channels are. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &st, 0, &ru) < 0) {
        if (errno != EINTR) { perror("quiz-runner-init: wait4"); return 125; }
    }
    /* Whatever the program forked and left behind (daemons, sleepers) dies with it. kill(-1)
     * reaches every process this uid may signal, so it is done only when asked (inside a
     * sandbox: own pid namespace, dedicated uid) and never as root, where it would reach the
     * whole host. */
    if (reap && getuid() != 0 && geteuid() != 0) {
        kill(-1, SIGKILL);
        while (waitpid(-1, NULL, WNOHANG) > 0) {}
    }

    if (collect_fd >= 0) {
        int src = open(collect, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat sb;
        if (src >= 0 && fstat(src, &sb) == 0 && S_ISREG(sb.st_mode)) {
            char buf[65536];
            long long left = collect_max;
            ssize_t n;
            while (left > 0 && (n = read(src, buf, (size_t)(left < (long long)sizeof buf ? left : (long long)sizeof buf))) > 0) {
                if (write(collect_fd, buf, n) != n) break;
                left -= n;
            }
        }
        if (src >= 0) close(src);
        close(collect_fd);
    }
    long long cpu_us = (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec +
                       (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
    if (status_fd >= 0) {
        char line[160];
        int len;
        if (WIFSIGNALED(st))
            len = snprintf(line, sizeof line, "signal %d cpu_us %lld maxrss_kb %ld\n",
                           WTERMSIG(st), cpu_us, ru.ru_maxrss);
        else
            len = snprintf(line, sizeof line, "exit %d cpu_us %lld maxrss_kb %ld\n",
                           WEXITSTATUS(st), cpu_us, ru.ru_maxrss);
        if (write(status_fd, line, len) != len) return 125;
        close(status_fd);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
