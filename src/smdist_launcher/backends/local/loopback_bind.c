/* Preloaded into every process of a local job: a socket bound to "any address" (0.0.0.0, ::, or listen() on an
 * unbound socket) is bound to a loopback address instead, so nothing of the job can be reached from another machine.
 *
 * Which loopback address: the simulated host's own ($SMDIST_BIND_ADDRESS, the address its name maps to, where
 * torch's TCPStore and the user's servers must be found), except for Open MPI's own sockets, which go to 127.0.0.1:
 * Open MPI publishes the addresses of the interfaces it was told to use (lo: 127.0.0.1) and peers dial those.
 * Sockets bound to a specific address are left alone. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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
