/* quiz-runner-init: the first program inside every sandbox (bwrap and docker alike), its pid 1.
 *
 * Two modes.
 *
 * Step mode (docker: one container per step), `quiz-runner-init [step options] -- PROG ARGS...`:
 *  1. runs the program in a child with the step's rlimits, every other fd closed;
 *  2. waits for it, reaping orphans as pid 1 must, and kills it when its CPU time passes
 *     --cpu-ms (RLIMIT_CPU counts whole seconds: it stays as the backstop);
 *  3. (--reap, never as root) kills whatever the program left behind;
 *  4. copies one regular file of the work dir (--collect, never through a symlink) and archives
 *     the build dir (--archive) for the runner;
 *  5. writes "exit N|signal N cpu_us U maxrss_kb K[ killed cpu]" on a status channel the program
 *     never had: an fd, or a path opened only once the program and its leftovers are gone
 *     (docker), so the program cannot forge it.
 *
 * Serve mode (bwrap: one sandbox per request), `quiz-runner-init --serve FD`: pid 1 of the
 * request's sandbox, holding the capabilities bwrap left it in the sandbox's user namespace (it
 * never runs a program itself). It reads steps from FD, a SOCK_SEQPACKET socket: each message
 * "run\0OPTION\0...\0--\0PROG\0ARGS..." carries the step's stdin, stdout, stderr, status (and
 * collect/archive) fds, named "@0".."@5" in the options. For each step it starts a step init in
 * a new pid, mount and IPC namespace (clone), which
 *  a. mounts fresh tmpfs (--tmpfs PATH:BYTES:INODES: /work, /tmp, /dev/shm), binds each entry of
 *     --work-from (the job's files) read-only into the work dir and detaches that dir, mounts a
 *     fresh /proc of its pid namespace with /proc/sys and friends read-only;
 *  b. moves into a nested user namespace where it is --userns UID, where no further user
 *     namespace may be made, and drops every capability;
 *  c. is the step's pid 1 and does 1-5 above.
 * When the step init exits, the kernel kills every process left in its pid namespace: nothing
 * of one case outlives it, nor sees the next case's files (fresh tmpfs) or processes (another
 * pid namespace). "kill" on FD kills the running step (wall clock, output cut); the server
 * answers "done" when the step init is gone (so is everything it started). --build
 * PATH:BYTES:INODES (the compile step) mounts that writable tmpfs in the request's namespace
 * for the step and makes it read-only after. EOF on FD ends the request: pid 1 exits, and the
 * kernel ends the request's pid namespace with it.
 *
 * Seccomp (`quiz-runner-init --seccomp FD --serve SOCK`): FD holds a compiled BPF program (the
 * runner's `quiz_runner.sandbox.seccomp`, made with libseccomp) that each step's program gets
 * just before execve, stacked on the filter bwrap applied to the whole sandbox: it denies the
 * mount and namespace calls this init itself needs for its set-up, so bwrap cannot apply them.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TMPFS 8
#define MAX_STEP_FDS 6
#define MAX_STEP_ARGS 1024
#define MAX_MESSAGE (256 * 1024)
#define MAX_FILTER_BYTES (BPF_MAXINSNS * sizeof(struct sock_filter))

/* The program's seccomp filter (--seccomp FD): read once per step, applied before execve. */
static int program_filter_fd = -1;
static unsigned char program_filter[MAX_FILTER_BYTES];
static size_t program_filter_len;

static void die(const char *what);

static void load_program_filter(void) {
    if (program_filter_fd < 0) return;
    size_t got = 0;
    for (;;) {
        ssize_t n = pread(program_filter_fd, program_filter + got, sizeof program_filter - got,
                          (off_t)got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) die("seccomp filter");
        if (n == 0) break;
        got += (size_t)n;
        if (got == sizeof program_filter) break;
    }
    if (got == 0 || got % sizeof(struct sock_filter) != 0) {
        errno = EINVAL;
        die("seccomp filter");
    }
    program_filter_len = got;
}

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

/* PATH:BYTES:INODES → a fresh tmpfs there with that size and inode limit. */
static void mount_tmpfs(const char *arg) {
    char spec[4096];
    snprintf(spec, sizeof spec, "%s", arg); /* argv stays as given: it is our cmdline */
    char *bytes = strchr(spec, ':');
    char *inodes = bytes ? strchr(bytes + 1, ':') : NULL;
    if (!inodes) {
        errno = EINVAL;
        die("--tmpfs wants PATH:BYTES:INODES");
    }
    *bytes++ = '\0';
    *inodes++ = '\0';
    char options[96];
    snprintf(options, sizeof options, "size=%s,nr_inodes=%s,mode=0755", bytes, inodes);
    if (mount("tmpfs", spec, "tmpfs", MS_NOSUID | MS_NODEV, options) != 0) die(spec);
}

/* A read-only bind of `path` over itself (or of `from` at `path`). */
static void bind_readonly(const char *from, const char *path) {
    if (mount(from, path, NULL, MS_BIND | MS_REC, NULL) != 0) die(path);
    if (mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0)
        die(path);
}

/* Each entry of `from` (the job's files) becomes a read-only mount of its own in `to`. */
static void bind_entries(const char *from, const char *to) {
    DIR *dir = opendir(from);
    if (!dir) die(from);
    struct dirent *e;
    char src[4096], dst[4096];
    while ((e = readdir(dir)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(src, sizeof src, "%s/%s", from, e->d_name);
        snprintf(dst, sizeof dst, "%s/%s", to, e->d_name);
        struct stat sb;
        if (lstat(src, &sb) != 0) die(src);
        if (S_ISDIR(sb.st_mode)) {
            if (mkdir(dst, 0755) != 0) die(dst);
        } else {
            int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
            if (fd < 0) die(dst);
            close(fd);
        }
        bind_readonly(src, dst);
    }
    closedir(dir);
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

/* Become `uid` in a nested user namespace with no capability and no way to make another.
 * `sysfd`: /proc/sys of a proc mount that is not read-only (opened before its cover). */
static void nest_userns(int uid, int sysfd) {
    uid_t outer_uid = getuid();
    gid_t outer_gid = getgid();
    if (unshare(CLONE_NEWUSER) != 0) die("unshare(CLONE_NEWUSER)");
    char map[64];
    write_file("/proc/self/setgroups", "deny");
    snprintf(map, sizeof map, "%d %u 1\n", uid, (unsigned)outer_uid);
    write_file("/proc/self/uid_map", map);
    snprintf(map, sizeof map, "%d %u 1\n", uid, (unsigned)outer_gid);
    write_file("/proc/self/gid_map", map);
    /* The limit of this namespace (looked up as its member, with its CAP_SYS_RESOURCE, which
     * unshare gave): nothing in it may make a user namespace. */
    int fd = openat(sysfd, "user/max_user_namespaces", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write_all(fd, "0", 1) != 0) die("max_user_namespaces");
    close(fd);
    close(sysfd);
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

struct step {
    long long cpu_ms, as, data, nproc, fsize, nofile, collect_max, archive_max, archive_files;
    const char *status_spec, *collect, *collect_spec, *archive, *archive_spec;
    const char *tmpfs[MAX_TMPFS];
    int ntmpfs, userns, reap;
    const char *work_from, *work_dir, *build; /* serve mode only */
    char **prog;
};

/* Options up to "--", then the program; 0, or 125 with a message. */
static int parse_step(int argc, char **argv, struct step *s) {
    memset(s, 0, sizeof *s);
    s->fsize = -1;
    s->nofile = 64;
    s->userns = -1;
    int i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) { i++; break; }
        if (strcmp(argv[i], "--reap") == 0) { s->reap = 1; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "quiz-runner-init: bad arguments\n"); return 125; }
        const char *k = argv[i];
        char *v = argv[++i];
        if (!strcmp(k, "--cpu-ms")) s->cpu_ms = atoll(v);
        else if (!strcmp(k, "--as")) s->as = atoll(v);
        else if (!strcmp(k, "--data")) s->data = atoll(v);
        else if (!strcmp(k, "--nproc")) s->nproc = atoll(v);
        else if (!strcmp(k, "--fsize")) s->fsize = atoll(v);
        else if (!strcmp(k, "--nofile")) s->nofile = atoll(v);
        else if (!strcmp(k, "--status")) s->status_spec = v;
        else if (!strcmp(k, "--collect")) s->collect = v;
        else if (!strcmp(k, "--collect-out")) s->collect_spec = v;
        else if (!strcmp(k, "--collect-max")) s->collect_max = atoll(v);
        else if (!strcmp(k, "--archive")) s->archive = v;
        else if (!strcmp(k, "--archive-out")) s->archive_spec = v;
        else if (!strcmp(k, "--archive-max")) s->archive_max = atoll(v);
        else if (!strcmp(k, "--archive-max-files")) s->archive_files = atoll(v);
        else if (!strcmp(k, "--userns")) s->userns = atoi(v);
        else if (!strcmp(k, "--tmpfs") && s->ntmpfs < MAX_TMPFS) s->tmpfs[s->ntmpfs++] = v;
        else if (!strcmp(k, "--work-from")) s->work_from = v;
        else if (!strcmp(k, "--chdir")) s->work_dir = v;
        else if (!strcmp(k, "--build")) s->build = v;
        else { fprintf(stderr, "quiz-runner-init: unknown option %s\n", k); return 125; }
    }
    if (i >= argc) { fprintf(stderr, "quiz-runner-init: no program\n"); return 125; }
    s->prog = &argv[i];
    return 0;
}

/* Run the step's program to its end (and what it left behind), report; the exit code. */
static int run_program(struct step *s) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("no_new_privs");

    /* Inherited report fds must not reach the program (paths are opened at the end). */
    const char *status_spec = s->status_spec, *collect = s->collect, *archive = s->archive;
    int status_fd = is_number(status_spec ? status_spec : "") ? atoi(status_spec) : -1;
    int collect_fd =
        collect && s->collect_spec && is_number(s->collect_spec) ? atoi(s->collect_spec) : -1;
    int archive_fd =
        archive && s->archive_spec && is_number(s->archive_spec) ? atoi(s->archive_spec) : -1;
    load_program_filter(); /* before its fd is closed with the others */
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
    /* The program runs as our uid: keep it out of /proc/<us>, where the report fds are. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

    long long cpu_ms = s->cpu_ms;
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
        if (s->as > 0) set_limit(RLIMIT_AS, (rlim_t)s->as, (rlim_t)s->as);
        /* RLIMIT_DATA: the writable private memory actually mapped (heaps, malloc, Node's
         * Buffers), not the PROT_NONE reservations that make RLIMIT_AS so loose for V8. */
        if (s->data > 0) set_limit(RLIMIT_DATA, (rlim_t)s->data, (rlim_t)s->data);
        if (s->nproc > 0) set_limit(RLIMIT_NPROC, (rlim_t)s->nproc, (rlim_t)s->nproc);
        if (s->fsize >= 0) set_limit(RLIMIT_FSIZE, (rlim_t)s->fsize, (rlim_t)s->fsize);
        if (s->nofile > 0) set_limit(RLIMIT_NOFILE, (rlim_t)s->nofile, (rlim_t)s->nofile);
        set_limit(RLIMIT_MEMLOCK, 0, 0);
        set_limit(RLIMIT_MSGQUEUE, 0, 0);
        if (program_filter_len) { /* the last thing before execve: no_new_privs is set */
            struct sock_fprog prog = {(unsigned short)(program_filter_len / sizeof(struct sock_filter)),
                                      (struct sock_filter *)program_filter};
            if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
                fprintf(stderr, "quiz-runner-init: seccomp: %s\n", strerror(errno));
                _exit(125);
            }
        }
        execv(s->prog[0], s->prog);
        fprintf(stderr, "quiz-runner-init: cannot run %s: %s\n", s->prog[0], strerror(errno));
        _exit(127);
    }

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
    if (s->reap && getuid() != 0 && geteuid() != 0) {
        kill(-1, SIGKILL);
        while (waitpid(-1, NULL, WNOHANG) > 0) {}
    }

    if (collect) {
        int out = collect_fd >= 0 ? collect_fd : open_out(s->collect_spec);
        int src = open(collect, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat sb;
        if (out >= 0 && src >= 0 && fstat(src, &sb) == 0 && S_ISREG(sb.st_mode)) {
            char buf[65536];
            long long left = s->collect_max;
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
        struct archive a = {archive_fd >= 0 ? archive_fd : open_out(s->archive_spec),
                            s->archive_max, s->archive_files, 0};
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

/* ---- serve mode ---- */

static int send_text(int sock, const char *text) {
    return send(sock, text, strlen(text), MSG_NOSIGNAL) < 0 ? -1 : 0;
}

/* The step init: pid 1 of the step's own pid namespace, in its own mount and IPC namespace. */
static int step_init(struct step *s, int *fds) {
    /* The server blocks SIGCHLD (its signalfd): the program must not inherit that mask. */
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_UNBLOCK, &chld, NULL);
    for (int k = 0; k < 3; k++)
        if (dup2(fds[k], k) < 0) die("dup2");
    /* Nothing mounted here reaches the request's namespace (or the next step's). */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die("make / private");
    for (int t = 0; t < s->ntmpfs; t++) mount_tmpfs(s->tmpfs[t]);
    if (s->work_from) {
        if (!s->work_dir) { errno = EINVAL; die("--work-from needs --chdir"); }
        bind_entries(s->work_from, s->work_dir);
        if (umount2(s->work_from, MNT_DETACH) != 0) die(s->work_from);
    }
    /* This pid namespace's own /proc, where /proc/sys and friends are read-only as bwrap makes
     * them; /proc/sys is opened before, for the nested namespace's own limit. */
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) die("/proc");
    int sysfd = open("/proc/sys", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (sysfd < 0) die("/proc/sys");
    static const char *covers[] = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"};
    for (size_t c = 0; c < sizeof covers / sizeof *covers; c++)
        if (access(covers[c], F_OK) == 0) bind_readonly(covers[c], covers[c]);
    if (s->work_dir && chdir(s->work_dir) != 0) die(s->work_dir);
    if (s->userns >= 0) nest_userns(s->userns, sysfd);
    else close(sysfd);
    return run_program(s);
}

/* One step: start its init, wait for it (or kill it when asked), answer "done". */
static int serve_step(int sock, int sigfd, char **argv, int argc, int *fds, int nfds) {
    char numbers[MAX_STEP_FDS][16];
    for (int a = 0; a < argc; a++) /* "@k" names the k-th fd of the message */
        if (argv[a][0] == '@' && argv[a][1] >= '0' && argv[a][1] < '0' + nfds && !argv[a][2]) {
            int k = argv[a][1] - '0';
            snprintf(numbers[k], sizeof numbers[k], "%d", fds[k]);
            argv[a] = numbers[k];
        }
    struct step s;
    if (nfds < 4 || parse_step(argc, argv, &s) != 0) return send_text(sock, "error bad step");
    if (s.build) mount_tmpfs(s.build);
    pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | SIGCHLD,
                               NULL, NULL, NULL, NULL);
    if (pid < 0) return send_text(sock, "error clone failed");
    if (pid == 0) {
        close(sock);
        close(sigfd);
        _exit(step_init(&s, fds));
    }
    for (int k = 0; k < nfds; k++) close(fds[k]);
    int st = 0, gone = 0;
    while (!gone) {
        struct pollfd p[2] = {{sigfd, POLLIN, 0}, {sock, POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            die("poll");
        }
        if (p[0].revents & POLLIN) {
            struct signalfd_siginfo info;
            if (read(sigfd, &info, sizeof info) < 0 && errno != EAGAIN) die("signalfd");
            int w;
            pid_t r;
            while ((r = waitpid(-1, &w, WNOHANG)) > 0)
                if (r == pid) { st = w; gone = 1; }
        }
        if (!gone && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            char cmd[16];
            ssize_t n = recv(sock, cmd, sizeof cmd, 0);
            if (n <= 0 || (n == 4 && !memcmp(cmd, "kill", 4))) kill(pid, SIGKILL);
            if (n <= 0) { /* the runner is gone: so is the request */
                while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
                return -1;
            }
        }
    }
    if (s.build) { /* what the compile step built is read-only for the cases */
        char spec[4096];
        snprintf(spec, sizeof spec, "%s", s.build);
        char *colon = strchr(spec, ':');
        if (colon) *colon = '\0';
        if (mount(NULL, spec, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0)
            die(spec);
    }
    char done[48];
    snprintf(done, sizeof done, "done %s %d", WIFSIGNALED(st) ? "signal" : "exit",
             WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    return send_text(sock, done);
}

static int serve(int sock) {
    int keep[2] = {sock, program_filter_fd};
    close_other_fds(keep, 2);
    fcntl(sock, F_SETFD, FD_CLOEXEC);
    if (program_filter_fd >= 0) fcntl(program_filter_fd, F_SETFD, FD_CLOEXEC);
    signal(SIGPIPE, SIG_IGN);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    int sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sigfd < 0) die("signalfd");
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    static char buf[MAX_MESSAGE + 1];
    static char *argv[MAX_STEP_ARGS + 1];
    if (send_text(sock, "ready") != 0) return 125;
    for (;;) {
        union {
            char space[CMSG_SPACE(sizeof(int) * MAX_STEP_FDS)];
            struct cmsghdr align;
        } control;
        struct iovec iov = {buf, MAX_MESSAGE};
        struct msghdr msg = {0};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.space;
        msg.msg_controllen = sizeof control.space;
        ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return 0; /* the request is over: every process of it dies with us */
        int fds[MAX_STEP_FDS], nfds = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                int count = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                for (int k = 0; k < count; k++) {
                    int fd;
                    memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof fd);
                    if (nfds < MAX_STEP_FDS) fds[nfds++] = fd;
                    else close(fd);
                }
            }
        buf[n] = '\0';
        int argc = 0;
        for (char *p = buf; p < buf + n && argc < MAX_STEP_ARGS; p += strlen(p) + 1) argv[argc++] = p;
        argv[argc] = NULL;
        int rc;
        if (n == 4 && !memcmp(buf, "kill", 4) && nfds == 0) {
            /* A kill that crossed the step's "done" (the wall clock ran out as it ended): the
             * step is gone already, and no answer is awaited. */
            continue;
        }
        if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || argc < 1 || strcmp(argv[0], "run") != 0) {
            for (int k = 0; k < nfds; k++) close(fds[k]);
            rc = send_text(sock, "error bad message");
        } else {
            rc = serve_step(sock, sigfd, argv, argc, fds, nfds);
        }
        if (rc != 0) return 0;
    }
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "--seccomp") && is_number(argv[2])) {
        program_filter_fd = atoi(argv[2]);
        argv[2] = argv[0];
        argv += 2;
        argc -= 2;
    }
    if (argc == 3 && !strcmp(argv[1], "--serve") && is_number(argv[2])) return serve(atoi(argv[2]));
    struct step s;
    if (parse_step(argc, argv, &s) != 0) return 125;
    if (s.ntmpfs || s.userns >= 0 || s.work_from || s.build) {
        fprintf(stderr, "quiz-runner-init: --tmpfs, --userns, --work-from, --build: serve mode only\n");
        return 125;
    }
    return run_program(&s);
}

