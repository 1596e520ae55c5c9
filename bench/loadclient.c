/* A small load client for bench/gateway_forward.py: keep-alive HTTP through a forward proxy,
 * or CONNECT tunnels (open, one GET, close), on N connections from one epoll thread.
 *
 * One thread, so it stays far below the systems it drives (tens of thousands of requests a
 * second take a fraction of a core); its own CPU is printed so the harness can show it was not
 * the limit. Built by the harness with gcc at run time; not part of the project's code.
 *
 *   loadclient MODE PROXY_HOST PROXY_PORT TARGET_HOST TARGET_PORT PATH AUTH CONNS SECONDS WARMUP
 *
 * MODE: "ka" (absolute-URI GETs on kept-alive connections), "tunnel" (CONNECT
 * TARGET_HOST:TARGET_PORT, one GET over the tunnel, close) or "close" (connect, one GET,
 * close: the tunnel loop's cost at a server alone, with no CONNECT); "tunnel-tls" and
 * "close-tls" do the same with a TLS handshake (OpenSSL, no verification, no session reuse)
 * and the GET over TLS, to the target's HTTPS port. AUTH: the base64 of user:password
 * for Proxy-Authorization, or "-" for none. Prints "start" when the warm-up ends and "stop"
 * when the measured time does (the harness reads the system's CPU at both), then one line of
 * key=value figures.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#define BUF 16384
#define TIMEOUT_US 10000000L /* a request or tunnel taking longer is counted as an error */
/* Latency histogram: 10 us buckets up to 1 s, then 1 ms buckets up to 60 s. */
#define FINE 100000
#define COARSE 59000

enum state { IDLE, CONNECTING, CONNECT_SENT, HANDSHAKING, REQUEST_SENT };

struct conn {
    int fd;
    SSL *ssl;         /* once the connection (or the tunnel over it) carries TLS */
    enum state state;
    char buf[BUF];
    size_t len;       /* bytes in buf (headers not yet complete) */
    long body_left;   /* body bytes still to read; -1: until EOF */
    int in_body;
    int status;
    int close_after;  /* the answer said the connection ends after it */
    int used;         /* answers read on this connection (0: a fresh one) */
    int resend;       /* the request is sent again on a new connection: keep its start time */
    long t0;          /* when the measured request or tunnel began (us) */
    long since;       /* when the current state began (us), for the timeout */
};

static int mode_tunnel, mode_close; /* neither: keep-alive */
static int mode_tls;
static SSL_CTX *tls;
static struct sockaddr_in proxy_addr;
static char request[1024], connect_req[1024];
static size_t request_len, connect_len;
static int epfd;

static long requests, http_errors, socket_errors, timeouts, reconnects, server_closes;
static int first_bad_status;
static unsigned fine[FINE], coarse[COARSE], overflow;

static long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000L + ts.tv_nsec / 1000;
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void record(long us) {
    if (us < FINE * 10L)
        fine[us / 10]++;
    else if (us < 1000000L + COARSE * 1000L)
        coarse[(us - 1000000L) / 1000]++;
    else
        overflow++;
}

static double percentile(double p) {
    long total = 0, seen = 0;
    for (int i = 0; i < FINE; i++) total += fine[i];
    for (int i = 0; i < COARSE; i++) total += coarse[i];
    total += overflow;
    if (total == 0) return 0;
    long want = (long)(p * total);
    if (want >= total) want = total - 1;
    for (int i = 0; i < FINE; i++)
        if ((seen += fine[i]) > want) return (i * 10 + 5) / 1000.0;
    for (int i = 0; i < COARSE; i++)
        if ((seen += coarse[i]) > want) return 1000.0 + i + 0.5;
    return 60000.0;
}

static void start_connection(struct conn *c);
static void send_request(struct conn *c, int measured_from_here);

static void drop(struct conn *c) {
    if (c->ssl) SSL_free(c->ssl); /* no close_notify: the loop closes as a client that is done */
    c->ssl = NULL;
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->state = IDLE;
}

static void fail(struct conn *c) {
    socket_errors++;
    drop(c);
    start_connection(c);
}

static int send_all(struct conn *c, const char *data, size_t len) {
    /* Requests are a few hundred bytes into an empty socket buffer: one write takes them. */
    if (c->ssl) return SSL_write(c->ssl, data, (int)len) == (int)len ? 0 : -1;
    ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);
    return n == (ssize_t)len ? 0 : -1;
}

/* recv, or SSL_read once TLS is on: bytes; 0 when closed; -1 with errno EAGAIN to wait. */
static ssize_t rd(struct conn *c, char *buf, size_t n) {
    if (!c->ssl) return recv(c->fd, buf, n, 0);
    int r = SSL_read(c->ssl, buf, (int)n);
    if (r > 0) return r;
    int e = SSL_get_error(c->ssl, r);
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_READ) {
        errno = EAGAIN;
        return -1;
    }
    if (e == SSL_ERROR_ZERO_RETURN) return 0;
    errno = EIO;
    return -1;
}

static void handshake(struct conn *c) {
    int r = SSL_do_handshake(c->ssl);
    if (r == 1) {
        send_request(c, 0); /* the tunnel's time runs from its connect */
        return;
    }
    int e = SSL_get_error(c->ssl, r);
    ERR_clear_error();
    /* Waiting to read is the usual; a handshake's few hundred bytes never fill an empty
     * socket buffer, so wanting to write is counted as an error rather than waited for. */
    if (e != SSL_ERROR_WANT_READ) fail(c);
}

static void start_tls(struct conn *c) {
    c->ssl = SSL_new(tls);
    SSL_set_fd(c->ssl, c->fd);
    SSL_set_connect_state(c->ssl);
    c->since = now_us();
    c->state = HANDSHAKING;
    handshake(c);
}

static void send_request(struct conn *c, int measured_from_here) {
    c->len = 0;
    c->in_body = 0;
    c->status = 0;
    c->close_after = 0;
    if (measured_from_here) c->t0 = now_us();
    c->since = now_us();
    c->state = REQUEST_SENT;
    if (send_all(c, request, request_len) < 0) fail(c);
}

static void start_connection(struct conn *c) {
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (c->fd < 0) {
        socket_errors++;
        c->state = IDLE;
        return;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* A new connection starts with no answer in progress (the last one's state would
     * otherwise count the next tunnel as answered when its CONNECT reply arrives). */
    c->used = 0;
    c->len = 0;
    c->in_body = 0;
    c->body_left = 0;
    c->status = 0;
    c->close_after = 0;
    c->t0 = c->since = now_us();
    c->state = CONNECTING;
    int r = connect(c->fd, (struct sockaddr *)&proxy_addr, sizeof proxy_addr);
    if (r < 0 && errno != EINPROGRESS) {
        socket_errors++;
        drop(c);
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP, .data.ptr = c};
    epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev);
}

/* The header block is complete in c->buf: read the status and how the body ends. */
static void parse_head(struct conn *c, size_t head_len) {
    c->status = 0;
    if (head_len > 12 && strncmp(c->buf, "HTTP/1.", 7) == 0) c->status = atoi(c->buf + 9);
    int http10 = strncmp(c->buf, "HTTP/1.0", 8) == 0;
    int keep_alive = 0;
    c->body_left = -1;
    c->close_after = 0;
    char *line = memchr(c->buf, '\n', head_len);
    while (line && (size_t)(line - c->buf) < head_len) {
        line++;
        if (strncasecmp(line, "Content-Length:", 15) == 0) c->body_left = atol(line + 15);
        if (strncasecmp(line, "Connection:", 11) == 0 || strncasecmp(line, "Proxy-Connection:", 17) == 0) {
            char *v = strchr(line, ':') + 1;
            while (*v == ' ') v++;
            if (strncasecmp(v, "close", 5) == 0) c->close_after = 1;
            if (strncasecmp(v, "keep-alive", 10) == 0) keep_alive = 1;
        }
        if (strncasecmp(line, "Transfer-Encoding:", 18) == 0) c->body_left = -2;
        line = memchr(line, '\n', head_len - (line - c->buf));
    }
    if (http10 && !keep_alive) c->close_after = 1;
    if (c->body_left == -1) c->close_after = 1; /* read to EOF */
}

static void answered(struct conn *c) {
    long t = now_us();
    requests++;
    record(t - c->t0);
    if (c->status < 200 || c->status > 299) {
        http_errors++;
        if (!first_bad_status) first_bad_status = c->status;
    }
    c->used++;
    if (mode_tunnel || mode_close) { /* one GET per connection: close, open the next */
        drop(c);
        start_connection(c);
    } else if (c->close_after) {
        reconnects++;
        drop(c);
        start_connection(c);
    } else {
        send_request(c, 1);
    }
}

static void on_readable(struct conn *c) {
    for (;;) {
        if (c->in_body) {
            char sink[BUF];
            size_t want = sizeof sink;
            if (c->body_left >= 0 && (size_t)c->body_left < want) want = c->body_left;
            if (want == 0) {
                answered(c);
                return;
            }
            ssize_t n = rd(c, sink, want);
            if (n == 0) {
                if (c->body_left < 0) answered(c);
                else fail(c);
                return;
            }
            if (n < 0) {
                if (errno != EAGAIN) fail(c);
                return;
            }
            if (c->body_left >= 0 && (c->body_left -= n) == 0) {
                answered(c);
                return;
            }
            continue;
        }
        ssize_t n = rd(c, c->buf + c->len, BUF - 1 - c->len);
        if (n == 0) {
            if (c->len == 0 && c->used > 0 && c->state == REQUEST_SENT && !mode_tunnel) {
                /* Closed before any byte of an answer, on a connection that had answered: the
                 * server closed it after its last answer (HTTP/1.1 lets it, without saying
                 * so). Sent again on a new connection, as HTTP clients do with a GET; counted
                 * apart from errors, since it tells whether the system keeps connections. */
                server_closes++;
                drop(c);
                start_connection(c);
                c->resend = 1;
                return;
            }
            fail(c);
            return;
        }
        if (n < 0) {
            if (errno != EAGAIN) fail(c);
            return;
        }
        c->len += n;
        c->buf[c->len] = 0;
        char *end = strstr(c->buf, "\r\n\r\n");
        if (!end) {
            if (c->len >= BUF - 1) fail(c);
            continue;
        }
        size_t head_len = end + 4 - c->buf;
        parse_head(c, head_len);
        if (c->state == CONNECT_SENT) {
            if (c->status != 200) {
                http_errors++;
                requests++;
                record(now_us() - c->t0);
                if (!first_bad_status) first_bad_status = c->status;
                drop(c);
                start_connection(c);
                return;
            }
            if (mode_tls) {
                start_tls(c);
                return;
            }
            send_request(c, 0);
            return;
        }
        if (c->body_left == -2) { /* chunked: not what nginx sends for a static file */
            fail(c);
            return;
        }
        size_t extra = c->len - head_len;
        c->in_body = 1;
        c->len = 0;
        if (c->body_left >= 0) {
            if ((long)extra > c->body_left) { /* more than one answer: not expected here */
                fail(c);
                return;
            }
            c->body_left -= extra;
            if (c->body_left == 0) {
                answered(c);
                return;
            }
        }
    }
}

static void on_event(struct conn *c, unsigned events) {
    if (c->state == CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err || (events & (EPOLLERR | EPOLLHUP))) {
            fail(c);
            return;
        }
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
        epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
        if (mode_tunnel) {
            c->len = 0;
            c->since = now_us();
            c->state = CONNECT_SENT;
            if (send_all(c, connect_req, connect_len) < 0) fail(c);
        } else if (mode_tls) {
            start_tls(c);
        } else {
            /* A closing loop counts from the connect; a request sent again from its first try. */
            send_request(c, !mode_close && !c->resend);
            c->resend = 0;
        }
        return;
    }
    if (c->state == HANDSHAKING) {
        handshake(c);
        return;
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) on_readable(c);
}

int main(int argc, char **argv) {
    if (argc != 11) {
        fprintf(stderr, "usage: %s ka|tunnel|close|tunnel-tls|close-tls PROXY_HOST PROXY_PORT TARGET_HOST TARGET_PORT PATH "
                        "AUTH CONNS SECONDS WARMUP\n", argv[0]);
        return 2;
    }
    mode_tunnel = strncmp(argv[1], "tunnel", 6) == 0;
    mode_close = strncmp(argv[1], "close", 5) == 0;
    mode_tls = strstr(argv[1], "-tls") != NULL;
    tls = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(tls, SSL_VERIFY_NONE, NULL);
    /* Every tunnel a full handshake: a client through a rotating gateway meets a new exit. */
    SSL_CTX_set_session_cache_mode(tls, SSL_SESS_CACHE_OFF);
    proxy_addr.sin_family = AF_INET;
    proxy_addr.sin_port = htons(atoi(argv[3]));
    inet_pton(AF_INET, argv[2], &proxy_addr.sin_addr);
    const char *th = argv[4], *tp = argv[5], *path = argv[6], *auth = argv[7];
    int conns = atoi(argv[8]);
    double seconds = atof(argv[9]), warmup = atof(argv[10]);
    char auth_line[600] = "";
    if (strcmp(auth, "-") != 0)
        snprintf(auth_line, sizeof auth_line, "Proxy-Authorization: Basic %s\r\n", auth);
    if (mode_tunnel || mode_close) {
        connect_len = snprintf(connect_req, sizeof connect_req,
                               "CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n%s\r\n", th, tp, th, tp,
                               auth_line);
        request_len = snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: %s:%s\r\n\r\n",
                               path, th, tp);
    } else {
        request_len = snprintf(request, sizeof request,
                               "GET http://%s:%s%s HTTP/1.1\r\nHost: %s:%s\r\n%s\r\n", th, tp,
                               path, th, tp, auth_line);
    }

    epfd = epoll_create1(0);
    struct conn *cs = calloc(conns, sizeof *cs);
    for (int i = 0; i < conns; i++) {
        cs[i].fd = -1;
        start_connection(&cs[i]);
    }
    long begin = now_us(), measure_from = begin + (long)(warmup * 1e6);
    long end = measure_from + (long)(seconds * 1e6), last_scan = begin;
    int measuring = 0;
    double cpu0 = 0;
    struct epoll_event events[1024];
    for (;;) {
        long t = now_us();
        if (!measuring && t >= measure_from) {
            /* The warm-up's counts are dropped: only the measured window is reported. */
            requests = http_errors = socket_errors = timeouts = reconnects = server_closes = 0;
            first_bad_status = 0;
            memset(fine, 0, sizeof fine);
            memset(coarse, 0, sizeof coarse);
            overflow = 0;
            measuring = 1;
            cpu0 = cpu_s();
            printf("start\n");
            fflush(stdout);
        }
        if (measuring && t >= end) break;
        if (t - last_scan > 100000) {
            last_scan = t;
            for (int i = 0; i < conns; i++) {
                if (cs[i].state == IDLE) start_connection(&cs[i]);
                else if (t - cs[i].since > TIMEOUT_US) {
                    timeouts++;
                    drop(&cs[i]);
                    start_connection(&cs[i]);
                }
            }
        }
        int n = epoll_wait(epfd, events, 1024, 50);
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            if (c->fd < 0) continue;
            on_event(c, events[i].events);
        }
    }
    double elapsed = (now_us() - measure_from) / 1e6, cpu = cpu_s() - cpu0;
    printf("stop\n");
    printf("requests=%ld seconds=%.3f rate=%.1f http_errors=%ld first_bad_status=%d "
           "socket_errors=%ld timeouts=%ld server_closes=%ld reconnects=%ld p50_ms=%.3f "
           "p99_ms=%.3f client_cpu_s=%.3f\n",
           requests, elapsed, requests / elapsed, http_errors, first_bad_status, socket_errors,
           timeouts, server_closes, reconnects, percentile(0.5), percentile(0.99), cpu);
    fflush(stdout);
    return 0;
}
