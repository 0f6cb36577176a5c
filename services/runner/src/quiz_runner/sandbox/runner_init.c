/* quiz-runner-init: the first program inside every sandbox (bwrap and docker alike), its pid 1.
 *
 * In order:
 *  1. (bwrap) gives every writable tmpfs its size and inode limit (--tmpfs-limit: a remount,
 *     which needs the CAP_SYS_ADMIN that bwrap leaves it in the sandbox's user namespace), then
 *     moves into a nested user namespace where it is --userns UID, forbids any further user
 *     namespace and drops every capability. From here on nothing is privileged.
 *  2. runs the program in a child with the case's rlimits, every other fd closed;
 *  3. waits for it, reaping orphans as pid 1 must, and kills it when its CPU time passes
 *     --cpu-ms (RLIMIT_CPU counts whole seconds: it stays as the backstop);
 *  4. (--reap, never as root) kills whatever the program left behind;
 *  5. copies one regular file of the work dir (--collect, never through a symlink) and archives
 *     the build dir (--archive) for the runner;
 *  6. writes "exit N|signal N cpu_us U maxrss_kb K[ killed cpu]" on a status channel the program
 *     never had: an fd (bwrap) or a path opened only once the program and its leftovers are gone
 *     (docker), so the program cannot forge it.
 *
 * Usage: quiz-runner-init [--cpu-ms MS] [--as B] [--data B] [--nproc N] [--fsize B] [--nofile N] [--reap]
 *          [--tmpfs-limit PATH:BYTES:INODES]... [--userns UID] [--status FD|PATH]
 *          [--collect SRC --collect-out FD|PATH --collect-max B]
 *          [--archive DIR --archive-out FD|PATH --archive-max B --archive-max-files N]
 *          -- PROG ARGS...
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TMPFS 8

static void die(const char *what) {
    fprintf(stderr, "quiz-runner-init: %s: %s\n", what, strerror(errno));
    _exit(125);
}

static int is_number(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

/* A report channel: an inherited fd, or a path in a directory the program could also write,
 * created afresh (never through a symlink or a file the program planted). */
static int open_out(const char *spec) {
    if (!spec) return -1;
    if (is_number(spec)) return atoi(spec);
    unlink(spec);
    return open(spec, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

static int write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write_all(fd, text, strlen(text)) != 0) die(path);
    close(fd);
}

static void set_limit(int resource, rlim_t soft, rlim_t hard) {
    struct rlimit rl = {soft, hard};
    if (setrlimit(resource, &rl) != 0) {
        perror("quiz-runner-init: setrlimit");
        _exit(126);
    }
}

/* PATH:BYTES:INODES → remount that tmpfs with its size and inode limit. */
static void limit_tmpfs(const char *arg) {
    char spec[4096];
    snprintf(spec, sizeof spec, "%s", arg); /* argv stays as given: it is our cmdline */
    char *bytes = strchr(spec, ':');
    char *inodes = bytes ? strchr(bytes + 1, ':') : NULL;
    if (!inodes) {
        errno = EINVAL;
        die("--tmpfs-limit wants PATH:BYTES:INODES");
    }
    *bytes++ = '\0';
    *inodes++ = '\0';
    char options[96];
    snprintf(options, sizeof options, "size=%s,nr_inodes=%s", bytes, inodes);
    if (mount(NULL, spec, NULL, MS_REMOUNT | MS_NOSUID | MS_NODEV, options) != 0) die(spec);
}

/* Close every fd from 3 up but the report channels (the sandbox was built from the others). */
static void close_other_fds(const int *keep, int nkeep) {
    unsigned int from = 3;
    for (;;) {
        int next = -1;
        for (int k = 0; k < nkeep; k++)
            if (keep[k] >= (int)from && (next < 0 || keep[k] < next)) next = keep[k];
        if (next < 0) break;
        if ((unsigned int)next > from) syscall(SYS_close_range, from, (unsigned int)next - 1, 0U);
        from = (unsigned int)next + 1;
    }
    syscall(SYS_close_range, from, ~0U, 0U);
}

static void drop_capabilities(void) {
    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) die("capbset");
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        die("ambient caps");
    struct __user_cap_header_struct head = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &head, data) != 0) die("capset");
    if (syscall(SYS_capget, &head, data) != 0) die("capget");
    for (int i = 0; i < 2; i++)
        if (data[i].effective || data[i].permitted || data[i].inheritable) {
            errno = EPERM;
            die("capabilities left after the drop");
        }
}

/* Become `uid` in a nested user namespace with no capability and no way to make another. */
static void nest_userns(int uid) {
    uid_t outer_uid = getuid();
    gid_t outer_gid = getgid();
    /* Counted in this namespace: the one made below is the last one anybody here may make. */
    write_file("/proc/sys/user/max_user_namespaces", "1");
    if (unshare(CLONE_NEWUSER) != 0) die("unshare(CLONE_NEWUSER)");
    char map[64];
    write_file("/proc/self/setgroups", "deny");
    snprintf(map, sizeof map, "%d %u 1\n", uid, (unsigned)outer_uid);
    write_file("/proc/self/uid_map", map);
    snprintf(map, sizeof map, "%d %u 1\n", uid, (unsigned)outer_gid);
    write_file("/proc/self/gid_map", map);
    drop_capabilities();
}

/* ---- archive of a directory tree: "D|F <mode-octal> <size> <pathlen>\n<path>[<data>]" ---- */

struct archive {
    int out;
    long long left_bytes;
    long long left_files;
    int failed;
};

static void archive_header(struct archive *a, char kind, mode_t mode, long long size,
                           const char *path) {
    char head[96];
    int n = snprintf(head, sizeof head, "%c %o %lld %zu\n", kind, (unsigned)(mode & 07777), size,
                     strlen(path));
    if (write_all(a->out, head, (size_t)n) != 0 || write_all(a->out, path, strlen(path)) != 0)
        a->failed = 1;
}

static void archive_tree(struct archive *a, int dirfd, char *path, size_t plen, int depth) {
    DIR *dir = fdopendir(dirfd);
    if (!dir) {
        close(dirfd);
        return;
    }
    struct dirent *e;
    while (!a->failed && (e = readdir(dir)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        size_t nlen = strlen(e->d_name);
        if (plen + nlen + 2 >= 4096 || depth > 64) {
            a->failed = 2;
            break;
        }
        struct stat sb;
        if (fstatat(dirfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode)) continue; /* links, fifos: dropped */
        if (--a->left_files < 0) {
            a->failed = 2;
            break;
        }
        size_t save = plen;
        if (plen) path[plen++] = '/';
        memcpy(path + plen, e->d_name, nlen + 1);
        plen += nlen;
        if (S_ISDIR(sb.st_mode)) {
            int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                archive_header(a, 'D', sb.st_mode, 0, path);
                archive_tree(a, sub, path, plen, depth + 1);
            }
        } else {
            int fd = openat(dirfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
                if ((a->left_bytes -= sb.st_size) < 0) {
                    a->failed = 2;
                } else {
                    archive_header(a, 'F', sb.st_mode, sb.st_size, path);
                    char buf[65536];
                    long long left = sb.st_size;
                    while (!a->failed && left > 0) {
                        ssize_t n = read(fd, buf, left < (long long)sizeof buf ? (size_t)left : sizeof buf);
                        if (n <= 0) {
                            a->failed = 1;
                            break;
                        }
                        if (write_all(a->out, buf, (size_t)n) != 0) a->failed = 1;
                        left -= n;
                    }
                }
            }
            if (fd >= 0) close(fd);
        }
        plen = save;
        path[plen] = '\0';
    }
    closedir(dir);
}

int main(int argc, char **argv) {
    long long cpu_ms = 0, as = 0, data = 0, nproc = 0, fsize = -1, nofile = 64, collect_max = 0;
    long long archive_max = 0, archive_files = 0;
    const char *status_spec = NULL, *collect = NULL, *collect_spec = NULL;
    const char *archive = NULL, *archive_spec = NULL;
    const char *tmpfs[MAX_TMPFS];
    int ntmpfs = 0, userns = -1, reap = 0;
    int i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) { i++; break; }
        if (strcmp(argv[i], "--reap") == 0) { reap = 1; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "quiz-runner-init: bad arguments\n"); return 125; }
        const char *k = argv[i];
        char *v = argv[++i];
        if (!strcmp(k, "--cpu-ms")) cpu_ms = atoll(v);
        else if (!strcmp(k, "--as")) as = atoll(v);
        else if (!strcmp(k, "--data")) data = atoll(v);
        else if (!strcmp(k, "--nproc")) nproc = atoll(v);
        else if (!strcmp(k, "--fsize")) fsize = atoll(v);
        else if (!strcmp(k, "--nofile")) nofile = atoll(v);
        else if (!strcmp(k, "--status")) status_spec = v;
        else if (!strcmp(k, "--collect")) collect = v;
        else if (!strcmp(k, "--collect-out")) collect_spec = v;
        else if (!strcmp(k, "--collect-max")) collect_max = atoll(v);
        else if (!strcmp(k, "--archive")) archive = v;
        else if (!strcmp(k, "--archive-out")) archive_spec = v;
        else if (!strcmp(k, "--archive-max")) archive_max = atoll(v);
        else if (!strcmp(k, "--archive-max-files")) archive_files = atoll(v);
        else if (!strcmp(k, "--userns")) userns = atoi(v);
        else if (!strcmp(k, "--tmpfs-limit") && ntmpfs < MAX_TMPFS) tmpfs[ntmpfs++] = v;
        else { fprintf(stderr, "quiz-runner-init: unknown option %s\n", k); return 125; }
    }
    if (i >= argc) { fprintf(stderr, "quiz-runner-init: no program\n"); return 125; }

    for (int t = 0; t < ntmpfs; t++) limit_tmpfs(tmpfs[t]);
    if (userns >= 0) nest_userns(userns);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("no_new_privs");

    /* Inherited report fds must not reach the program (paths are opened at the end). */
    int status_fd = is_number(status_spec ? status_spec : "") ? atoi(status_spec) : -1;
    int collect_fd = collect && collect_spec && is_number(collect_spec) ? atoi(collect_spec) : -1;
    int archive_fd = archive && archive_spec && is_number(archive_spec) ? atoi(archive_spec) : -1;
    int keep[3] = {status_fd, collect_fd, archive_fd};
    close_other_fds(keep, 3);
    if (status_fd >= 0) fcntl(status_fd, F_SETFD, FD_CLOEXEC);
    if (collect_fd >= 0) fcntl(collect_fd, F_SETFD, FD_CLOEXEC);
    if (archive_fd >= 0) fcntl(archive_fd, F_SETFD, FD_CLOEXEC);
    signal(SIGPIPE, SIG_IGN);

    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);

    pid_t pid = fork();
    if (pid < 0) { perror("quiz-runner-init: fork"); return 125; }
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        signal(SIGPIPE, SIG_DFL);
        /* Nothing but stdin, stdout and stderr: not the fds the sandbox was built from. */
        syscall(SYS_close_range, 3U, ~0U, 0U);
        set_limit(RLIMIT_CORE, 0, 0);
        if (cpu_ms > 0) {
            rlim_t whole = (rlim_t)((cpu_ms + 999) / 1000);
            set_limit(RLIMIT_CPU, whole, whole + 1);
        }
        if (as > 0) set_limit(RLIMIT_AS, (rlim_t)as, (rlim_t)as);
        /* RLIMIT_DATA: the writable private memory actually mapped (heaps, malloc, Node's
         * Buffers), not the PROT_NONE reservations that make RLIMIT_AS so loose for V8. */
        if (data > 0) set_limit(RLIMIT_DATA, (rlim_t)data, (rlim_t)data);
        if (nproc > 0) set_limit(RLIMIT_NPROC, (rlim_t)nproc, (rlim_t)nproc);
        if (fsize >= 0) set_limit(RLIMIT_FSIZE, (rlim_t)fsize, (rlim_t)fsize);
        if (nofile > 0) set_limit(RLIMIT_NOFILE, (rlim_t)nofile, (rlim_t)nofile);
        set_limit(RLIMIT_MEMLOCK, 0, 0);
        set_limit(RLIMIT_MSGQUEUE, 0, 0);
        execv(argv[i], &argv[i]);
        fprintf(stderr, "quiz-runner-init: cannot run %s: %s\n", argv[i], strerror(errno));
        _exit(127);
    }
    /* The program runs as our uid: keep it out of /proc/<us>, where the report fds are. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

    clockid_t cpu_clock;
    int watch_cpu = cpu_ms > 0 && clock_getcpuclockid(pid, &cpu_clock) == 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1) cpus = 1;
    int st = 0, ended = 0, killed_cpu = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (!ended) {
        int s;
        struct rusage r;
        pid_t w;
        /* pid 1 adopts the program's orphans: reap them as they die, the program last. */
        while ((w = wait4(-1, &s, WNOHANG, &r)) > 0)
            if (w == pid) {
                st = s;
                ru = r;
                ended = 1;
            }
        if (ended) break;
        if (w < 0 && errno == ECHILD) { fprintf(stderr, "quiz-runner-init: lost the program\n"); return 125; }
        struct timespec wait = {1, 0};
        if (watch_cpu && !killed_cpu) {
            struct timespec used;
            if (clock_gettime(cpu_clock, &used) == 0) {
                long long used_ms = (long long)used.tv_sec * 1000 + used.tv_nsec / 1000000;
                if (used_ms >= cpu_ms) {
                    kill(pid, SIGKILL);
                    killed_cpu = 1;
                    continue;
                }
                /* All its threads on every core cannot reach the limit before this. */
                long long next = (cpu_ms - used_ms) / cpus;
                if (next < 2) next = 2;
                if (next < 1000) wait = (struct timespec){0, (long)(next * 1000000)};
            }
        }
        sigtimedwait(&chld, NULL, &wait);
    }
    /* Whatever the program forked and left behind (daemons, sleepers) dies with it. kill(-1)
     * reaches every process this uid may signal, so it is done only when asked (inside a
     * sandbox: its own pid namespace, whose pid 1 we are) and never as root. */
    if (reap && getuid() != 0 && geteuid() != 0) {
        kill(-1, SIGKILL);
        while (waitpid(-1, NULL, WNOHANG) > 0) {}
    }

    if (collect) {
        int out = collect_fd >= 0 ? collect_fd : open_out(collect_spec);
        int src = open(collect, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat sb;
        if (out >= 0 && src >= 0 && fstat(src, &sb) == 0 && S_ISREG(sb.st_mode)) {
            char buf[65536];
            long long left = collect_max;
            ssize_t n;
            while (left > 0 && (n = read(src, buf, (size_t)(left < (long long)sizeof buf ? left : (long long)sizeof buf))) > 0) {
                if (write_all(out, buf, (size_t)n) != 0) break;
                left -= n;
            }
        }
        if (src >= 0) close(src);
        if (out >= 0) close(out);
    }
    if (archive) {
        struct archive a = {archive_fd >= 0 ? archive_fd : open_out(archive_spec), archive_max,
                            archive_files, 0};
        int dirfd = open(archive, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (a.out >= 0 && dirfd >= 0) {
            char path[4096] = "";
            archive_tree(&a, dirfd, path, 0, 0);
            if (a.failed == 2) write_all(a.out, "E over\n", 7);
        }
        if (a.out >= 0) close(a.out);
    }
    long long cpu_us = (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec +
                       (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
    int out = status_fd >= 0 ? status_fd : open_out(status_spec);
    if (out >= 0) {
        char line[160];
        int len = snprintf(line, sizeof line, "%s %d cpu_us %lld maxrss_kb %ld%s\n",
                           WIFSIGNALED(st) ? "signal" : "exit",
                           WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), cpu_us,
                           ru.ru_maxrss, killed_cpu ? " killed cpu" : "");
        if (write_all(out, line, (size_t)len) != 0) return 125;
        close(out);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
