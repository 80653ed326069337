/* Preloaded into every process of a local job: a socket bound to "any address" (0.0.0.0, ::, or listen() on an
 * unbound socket) is bound to a loopback address instead, so nothing of the job can be reached from another machine.
 *
 * Which loopback address: the simulated host's own ($SMDIST_BIND_ADDRESS, the address its name maps to, where
 * torch's TCPStore and the user's servers must be found), except for Open MPI's own sockets, which go to 127.0.0.1:
 * Open MPI publishes the addresses of the interfaces it was told to use (lo: 127.0.0.1) and peers dial those.
 * Sockets bound to a specific address are left alone.
 *
 * Name lookups: the simulated hosts' names and loopback addresses are answered here, both ways, from the job's host
 * map ($SMDIST_HOST_MAP, {"algo-1": "127.x.0.2", ...}) and never asked of DNS. On a cluster algo-N resolves both ways;
 * here a reverse lookup of 127.x.0.N (or of its IPv4-mapped form, which a dual-stack listener sees) would go to DNS,
 * fail (torch c10d: "The hostname of the client socket cannot be retrieved. err=-3") and cost a resolver timeout per
 * accepted connection where no DNS server is reachable.
 *
 * Rank exits: a registered rank (sitecustomize made $SMDIST_STACKS_DIR/<pid>.txt) that calls exit() leaves
 * <pid>.exit ({"pid", "code", "time_ns"}): only the process's parent learns its exit status otherwise, and the
 * launcher names a rank that exited 0 while the others still ran (backends/local/diagnosis.py). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*listen_fn)(int, int);

static int called_from_open_mpi(void *caller) {
    Dl_info info;
    if (caller == NULL || !dladdr(caller, &info) || info.dli_fname == NULL)
        return 0;
    const char *f = info.dli_fname;
    return strstr(f, "openmpi") || strstr(f, "libopen-") || strstr(f, "libmpi") || strstr(f, "pmix") ||
           strstr(f, "mca_");
}

static void loopback_v4(void *caller, struct in_addr *out) {
    const char *addr = called_from_open_mpi(caller) ? NULL : getenv("SMDIST_BIND_ADDRESS");
    if (addr == NULL || inet_pton(AF_INET, addr, out) != 1 || (ntohl(out->s_addr) >> 24) != 127)
        out->s_addr = htonl(INADDR_LOOPBACK);
}

static bind_fn real_bind(void) {
    static bind_fn fn;
    if (fn == NULL)
        fn = (bind_fn)dlsym(RTLD_NEXT, "bind");
    return fn;
}

static int confined_bind(int fd, const struct sockaddr *sa, socklen_t len, void *caller) {
    if (sa != NULL && sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in in4;
        memcpy(&in4, sa, sizeof in4);
        if (in4.sin_addr.s_addr == htonl(INADDR_ANY)) {
            loopback_v4(caller, &in4.sin_addr);
            return real_bind()(fd, (const struct sockaddr *)&in4, sizeof in4);
        }
    } else if (sa != NULL && sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 in6;
        memcpy(&in6, sa, sizeof in6);
        if (IN6_IS_ADDR_UNSPECIFIED(&in6.sin6_addr)) {
            int v6only = 0;
            socklen_t optlen = sizeof v6only;
            if (getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &optlen) != 0 || v6only) {
                in6.sin6_addr = in6addr_loopback;
            } else { /* dual-stack "::": the IPv4-mapped form of the loopback address keeps IPv4 clients working */
                struct in_addr v4;
                loopback_v4(caller, &v4);
                memset(&in6.sin6_addr, 0, sizeof in6.sin6_addr);
                in6.sin6_addr.s6_addr[10] = 0xff;
                in6.sin6_addr.s6_addr[11] = 0xff;
                memcpy(&in6.sin6_addr.s6_addr[12], &v4, 4);
            }
            return real_bind()(fd, (const struct sockaddr *)&in6, sizeof in6);
        }
    }
    return real_bind()(fd, sa, len);
}

int bind(int fd, const struct sockaddr *sa, socklen_t len) {
    return confined_bind(fd, sa, len, __builtin_return_address(0));
}

/* listen() on a socket nobody bound binds it to the wildcard address with a free port: bind it here first. */
int listen(int fd, int backlog) {
    static listen_fn real_listen;
    if (real_listen == NULL)
        real_listen = (listen_fn)dlsym(RTLD_NEXT, "listen");
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    memset(&ss, 0, sizeof ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET && ((struct sockaddr_in *)&ss)->sin_port == 0) {
            confined_bind(fd, (struct sockaddr *)&ss, sizeof(struct sockaddr_in), __builtin_return_address(0));
        } else if (ss.ss_family == AF_INET6 && ((struct sockaddr_in6 *)&ss)->sin6_port == 0) {
            confined_bind(fd, (struct sockaddr *)&ss, sizeof(struct sockaddr_in6), __builtin_return_address(0));
        }
    }
    return real_listen(fd, backlog);
}

/* ---- the job's host map ------------------------------------------------------------------------------------- */

/* The next "..." string of a flat JSON object (names and addresses need no escapes); NULL at the end. */
static const char *next_string(const char *p, const char **start, size_t *len) {
    p = strchr(p, '"');
    if (p == NULL)
        return NULL;
    const char *end = strchr(p + 1, '"');
    if (end == NULL)
        return NULL;
    *start = p + 1;
    *len = (size_t)(end - p - 1);
    return end + 1;
}

/* want_value: find `key` among the names and copy its address; else find `key` among the addresses, copy its name. */
static int host_map_lookup(const char *key, int want_value, char *out, size_t outlen) {
    const char *map = getenv("SMDIST_HOST_MAP");
    if (map == NULL || key == NULL)
        return 0;
    const char *p = map, *k, *v;
    size_t klen, vlen;
    while ((p = next_string(p, &k, &klen)) != NULL && (p = next_string(p, &v, &vlen)) != NULL) {
        /* Hosts that share this machine's own 127.0.0.1 (Slurm nodes of one test machine) are not simulated hosts
         * with an address each: resolving their names to it would make mpirun start their ranks locally. */
        if (vlen == 9 && strncmp(v, "127.0.0.1", 9) == 0)
            continue;
        const char *match = want_value ? k : v, *answer = want_value ? v : k;
        size_t mlen = want_value ? klen : vlen, alen = want_value ? vlen : klen;
        if (mlen == strlen(key) && strncmp(match, key, mlen) == 0 && alen < outlen) {
            memcpy(out, answer, alen);
            out[alen] = '\0';
            return 1;
        }
    }
    return 0;
}

/* ---- address -> name ---------------------------------------------------------------------------------------- */

typedef int (*getnameinfo_fn)(const struct sockaddr *, socklen_t, char *, socklen_t, char *, socklen_t, int);

int getnameinfo(const struct sockaddr *sa, socklen_t salen, char *host, socklen_t hostlen, char *serv,
                socklen_t servlen, int flags) {
    static getnameinfo_fn real;
    if (real == NULL)
        real = (getnameinfo_fn)dlsym(RTLD_NEXT, "getnameinfo");
    if (sa == NULL || host == NULL || hostlen == 0 || (flags & NI_NUMERICHOST))
        return real(sa, salen, host, hostlen, serv, servlen, flags);
    struct in_addr v4;
    int loopback_v6 = 0;
    if (sa->sa_family == AF_INET && salen >= sizeof(struct sockaddr_in)) {
        v4 = ((const struct sockaddr_in *)sa)->sin_addr;
    } else if (sa->sa_family == AF_INET6 && salen >= sizeof(struct sockaddr_in6)) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6))
            memcpy(&v4, &a6->s6_addr[12], 4);
        else if (IN6_IS_ADDR_LOOPBACK(a6))
            loopback_v6 = 1;
        else
            return real(sa, salen, host, hostlen, serv, servlen, flags);
    } else {
        return real(sa, salen, host, hostlen, serv, servlen, flags);
    }
    char numeric[INET_ADDRSTRLEN], name[256];
    const char *answer;
    if (loopback_v6) {
        answer = "localhost";
    } else {
        if ((ntohl(v4.s_addr) >> 24) != 127)
            return real(sa, salen, host, hostlen, serv, servlen, flags);  /* not ours: the system answers */
        inet_ntop(AF_INET, &v4, numeric, sizeof numeric);
        if (host_map_lookup(numeric, 0, name, sizeof name))
            answer = name;
        else if (v4.s_addr == htonl(INADDR_LOOPBACK))
            answer = "localhost";
        else if (flags & NI_NAMEREQD)
            return EAI_NONAME;
        else
            answer = numeric;  /* what getnameinfo gives for an address without a name, minus the DNS round trip */
    }
    if (strlen(answer) >= (size_t)hostlen)
        return EAI_OVERFLOW;
    strcpy(host, answer);
    if (serv != NULL && servlen > 0)
        return real(sa, salen, NULL, 0, serv, servlen, flags);
    return 0;
}

/* ---- name -> address ---------------------------------------------------------------------------------------- */

typedef int (*getaddrinfo_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

/* A host name of the job resolves to its address here as on a cluster, also where no private /etc/hosts names
 * it (host isolation needs root). */
int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res) {
    static getaddrinfo_fn real;
    if (real == NULL)
        real = (getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    char address[INET6_ADDRSTRLEN];
    if (node == NULL || !host_map_lookup(node, 1, address, sizeof address))
        return real(node, service, hints, res);
    struct addrinfo h;
    if (hints != NULL)
        h = *hints;
    else {
        memset(&h, 0, sizeof h);
        h.ai_flags = AI_V4MAPPED | AI_ADDRCONFIG;
    }
    h.ai_flags |= AI_NUMERICHOST;
    if (h.ai_family == AF_INET6)
        h.ai_flags |= AI_V4MAPPED;  /* as /etc/hosts answers an IPv6 query for an IPv4 host */
    int rc = real(address, service, &h, res);
    if (rc == 0 && (h.ai_flags & AI_CANONNAME) && *res != NULL) {
        char *canon = strdup(node);  /* the name, not the number (freeaddrinfo frees it) */
        if (canon != NULL) {
            free((*res)->ai_canonname);
            (*res)->ai_canonname = canon;
        }
    }
    return rc;
}

/* ---- rank exits --------------------------------------------------------------------------------------------- */

static void note_rank_exit(int status) {
    static int noted;
    if (noted)
        return;
    noted = 1;
    const char *dir = getenv("SMDIST_STACKS_DIR");
    if (dir == NULL)
        return;
    char path[4096], tmp[4096];
    int pid = (int)getpid();
    if (snprintf(path, sizeof path, "%s/%d.txt", dir, pid) >= (int)sizeof path || access(path, F_OK) != 0)
        return;  /* not a rank (torchrun's agent, orted, a forked helper): checked before anything allocates */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(tmp, sizeof tmp, "%s/.%d.exit.tmp", dir, pid);
    snprintf(path, sizeof path, "%s/%d.exit", dir, pid);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return;
    fprintf(f, "{\"pid\": %d, \"code\": %d, \"time_ns\": %lld}\n", pid, status & 0xff,
            (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
    if (fclose(f) == 0)
        rename(tmp, path);  /* whole or absent for a reader */
    else
        unlink(tmp);
}

static void note_on_exit(int status, void *unused) {
    (void)unused;
    note_rank_exit(status);
}


/* os._exit() skips exit()'s handlers, and the rank entry point ends a rank with it when gloo's threads are still
 * alive (container/rank_entry.py): note the status there too. */
typedef void (*exit_fn)(int);
static exit_fn real_exit;  /* resolved at load: a forked child must not enter the dynamic loader (its lock) */

__attribute__((constructor)) static void register_exit_note(void) {
    real_exit = (exit_fn)dlsym(RTLD_NEXT, "_exit");
    on_exit(note_on_exit, NULL);
}

void _exit(int status) {
    note_rank_exit(status);
    if (real_exit != NULL)
        real_exit(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}
