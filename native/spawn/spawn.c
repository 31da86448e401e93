/*
 * cni_driver_spawn: runs a CNI plugin binary without forking Node.
 *
 * Node's child_process forks the whole driver on the main thread: the kernel
 * copies the page tables of a ~150 MB process, the event loop stands still
 * meanwhile (~1.5-5 ms per exec), and the child pays again to tear that copy
 * down at exec. Every pod set-up and tear-down execs host-local, so that cost
 * was most of the driver's own CPU per pod. Here the exec is glibc's
 * posix_spawn (clone with CLONE_VM | CLONE_VFORK: nothing is copied), made on a
 * thread of a small pool, which then feeds stdin, collects stdout and stderr,
 * waits for the exit through a pidfd and reaps the plugin; the result reaches
 * JavaScript through one threadsafe function. The main thread only queues the
 * job: the pool's threads are kept (up to POOL_IDLE_SECONDS idle), because
 * creating a thread per exec mapped a stack per exec, and under a hundred
 * concurrent pods the main thread then waited ~1 ms per exec on the process's
 * memory-map lock.
 *
 *   supported(): boolean   posix_spawn and pidfd_open work in this process
 *   spawn(path, env: string[], stdin: Buffer, maxOutput: number,
 *         callback(err, result)): handle
 *       result: { stdout: Buffer, stderr: Buffer, exitCode: number | null,
 *                 signal: number | null, tooMuchOutput: boolean }
 *       err: the binary could not be started (an Error whose `code` is the
 *            errno name, "ETXTBSY", "ENOENT", "EACCES" ...)
 *   kill(handle, signal: number): undefined
 *       signals the plugin's process group, as long as the plugin is not yet
 *       reaped (its pid, and so its group id, cannot have been reused); before
 *       the spawn it cancels the spawn. After SIGKILL the thread stops waiting
 *       for output once the plugin itself has exited: a grandchild that left
 *       the group must not hold the call open through a pipe.
 *
 * The plugin runs as the leader of a new session (its own process group), with
 * every signal at its default disposition and none blocked (Node ignores
 * SIGPIPE; an ignored signal would survive the exec), and with no descriptor
 * of ours but its three pipes.
 *
 * The pool outlives the Node environment that queued a job (process.exit, a
 * worker terminated while plugins run): the library stays mapped for its
 * threads, and a job that ends after its environment's teardown began is
 * dropped rather than handed to a threadsafe function Node has freed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <node_api.h>

#include "../common/errno-error.h"
#include "../common/pin-library.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* Read size per read(2); output buffers grow by doubling up to maxOutput. */
#define READ_CHUNK 16384

typedef struct {
  unsigned char *data;
  size_t len;
  size_t cap;
} buffer_t;

/* Per Node environment: the threadsafe function every job answers through. */
typedef struct {
  napi_threadsafe_function tsfn;
  uint32_t inflight; /* main thread only; the tsfn keeps the event loop alive while > 0 */
  /* Set by the environment's cleanup hook: from then on Node may free the tsfn
   * at any moment, so a pool thread checks it and calls the tsfn under mu. */
  pthread_mutex_t mu;
  int closing;
} module_t;

typedef struct job {
  struct job *next; /* the pool's queue */
  module_t *mod;
  napi_ref callback;

  /* Inputs, owned by the job. */
  char *path;
  char **envp;
  unsigned char *in;
  size_t in_len;
  size_t max_output;

  /* Shared between the thread and kill(); guarded by mu. */
  pthread_mutex_t mu;
  pid_t pid;       /* 0 until spawned */
  int reaped;      /* the pid is no longer ours to signal */
  int stop_signal; /* a kill() that came before the spawn */
  int abandon;     /* SIGKILL sent: stop waiting for output once the plugin exited */
  int ctl;         /* eventfd that wakes the thread's poll when kill() was called */

  /* Results, written by the thread, read by deliver() after it. */
  buffer_t out;
  buffer_t err;
  size_t total_output;
  int too_much;
  int spawn_errno;
  int waited; /* wait_status holds the plugin's end (waitpid succeeded) */
  int wait_status;

  /* Main thread only: the handle's finalizer and deliver() each drop one. */
  int refs;
} job_t;

/* The pool: threads made on demand, kept while work comes, gone after idling. */
#define POOL_MAX_THREADS 256
#define POOL_IDLE_SECONDS 30
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cv = PTHREAD_COND_INITIALIZER;
static job_t *queue_head, *queue_tail;
static unsigned queued, idle_threads, pool_threads;

static napi_value throw_errno(napi_env env, int err, const char *what) {
  napi_throw(env, errno_error(env, err, what));
  return NULL;
}

static napi_value throw_type(napi_env env, const char *message) {
  napi_throw_type_error(env, NULL, message);
  return NULL;
}

/*
 * Everything a job holds but its mutex and state. deliver() calls it: the
 * handle lives on until the garbage collector finalizes it, which can be much
 * later, and until then the job would hold an eventfd and up to maxOutput of
 * copied output that V8 does not know about (a burst of execs piled up
 * descriptors and memory between collections).
 */
static void release_io(job_t *job) {
  free(job->path);
  job->path = NULL;
  if (job->envp) {
    for (char **e = job->envp; *e; e++) free(*e);
    free(job->envp);
    job->envp = NULL;
  }
  free(job->in);
  job->in = NULL;
  free(job->out.data);
  job->out = (buffer_t){0};
  free(job->err.data);
  job->err = (buffer_t){0};
  if (job->ctl >= 0) close(job->ctl);
  job->ctl = -1;
}

static void free_job(job_t *job) {
  release_io(job);
  pthread_mutex_destroy(&job->mu);
  free(job);
}

static void drop_ref(job_t *job) {
  if (--job->refs == 0) free_job(job);
}

/* Signals the plugin's group while its pid is still ours. Caller holds mu. */
static void signal_group_locked(job_t *job, int sig) {
  if (job->pid > 0 && !job->reaped) kill(-job->pid, sig);
}

/* ------------------------------------------------------------------------- */
/* The thread */

/* Appends what fits under the job's output bound; returns 0 once over it. */
static int keep_output(job_t *job, buffer_t *b, const unsigned char *chunk, size_t n) {
  job->total_output += n;
  if (job->total_output > job->max_output) return 0;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : READ_CHUNK;
    while (cap < b->len + n) cap *= 2;
    unsigned char *grown = realloc(b->data, cap);
    if (!grown) return 0;
    b->data = grown;
    b->cap = cap;
  }
  memcpy(b->data + b->len, chunk, n);
  b->len += n;
  return 1;
}

/* One read from a plugin's output pipe; returns 0 at EOF or on an error. */
static int drain(job_t *job, int fd, buffer_t *into) {
  unsigned char chunk[READ_CHUNK];
  ssize_t n = read(fd, chunk, sizeof chunk);
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  if (n == 0) return 0;
  if (!job->too_much && !keep_output(job, into, chunk, (size_t)n)) {
    // A misbehaving plugin: stop it, keep draining so it cannot block on a full pipe.
    job->too_much = 1;
    pthread_mutex_lock(&job->mu);
    signal_group_locked(job, SIGKILL);
    pthread_mutex_unlock(&job->mu);
  }
  return 1;
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

/*
 * pipe2, with both ends above the standard descriptors. Should the process have
 * closed 0, 1 or 2 (and another thread closed its own end meanwhile), a
 * plugin-side end could land on a standard descriptor that an earlier dup2 of
 * start_plugin overwrites in the child (its stderr would become its stdout,
 * say); and the driver's own writes to that number would reach the plugin.
 */
static int pipe_above_std(int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) < 0) return -1;
  for (int i = 0; i < 2; i++) {
    if (fds[i] > 2) continue;
    int moved = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
    if (moved < 0) {
      int e = errno;
      close(fds[0]);
      close(fds[1]);
      fds[0] = fds[1] = -1;
      errno = e;
      return -1;
    }
    close(fds[i]);
    fds[i] = moved;
  }
  return 0;
}

static int start_plugin(job_t *job, int in_rd, int out_wr, int err_wr) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  int rc = posix_spawn_file_actions_init(&actions);
  if (rc) return rc;
  rc = posix_spawnattr_init(&attr);
  if (rc) {
    posix_spawn_file_actions_destroy(&actions);
    return rc;
  }
  // Each of these allocates (ENOMEM): spawning without one would hand the
  // plugin the driver's own stdout or stderr, or every descriptor we hold.
  rc = posix_spawn_file_actions_adddup2(&actions, in_rd, 0);
  if (!rc) rc = posix_spawn_file_actions_adddup2(&actions, out_wr, 1);
  if (!rc) rc = posix_spawn_file_actions_adddup2(&actions, err_wr, 2);
  // Whatever Node or another addon opened without O_CLOEXEC stays ours.
  if (!rc) rc = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  if (!rc) rc = posix_spawnattr_setsigmask(&attr, &none);
  if (!rc) rc = posix_spawnattr_setsigdefault(&attr, &all);
  if (!rc)
    rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
                                             POSIX_SPAWN_SETSIGDEF);
  // libcni's exec.Cmd gives the plugin its path as argv[0].
  char *argv[] = {job->path, NULL};
  pid_t pid = 0;
  if (!rc) {
    pthread_mutex_lock(&job->mu);
    if (job->stop_signal) {
      rc = ECANCELED;
    } else {
      rc = posix_spawn(&pid, job->path, &actions, &attr, argv, job->envp);
      if (rc == 0) job->pid = pid;
    }
    pthread_mutex_unlock(&job->mu);
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return rc;
}

static void pump(job_t *job, int in_wr, int out_rd, int err_rd, int pidfd) {
  size_t in_off = 0;
  int exited = 0;
  if (job->in_len == 0) close_fd(&in_wr);
  for (;;) {
    int abandon = __atomic_load_n(&job->abandon, __ATOMIC_ACQUIRE);
    if (exited && ((out_rd < 0 && err_rd < 0) || abandon)) break;
    struct pollfd fds[5];
    int n = 0, i_in = -1, i_out = -1, i_err = -1, i_pid = -1;
    if (in_wr >= 0) fds[i_in = n++] = (struct pollfd){.fd = in_wr, .events = POLLOUT};
    if (out_rd >= 0) fds[i_out = n++] = (struct pollfd){.fd = out_rd, .events = POLLIN};
    if (err_rd >= 0) fds[i_err = n++] = (struct pollfd){.fd = err_rd, .events = POLLIN};
    if (!exited) fds[i_pid = n++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
    fds[n++] = (struct pollfd){.fd = job->ctl, .events = POLLIN};
    if (poll(fds, n, -1) < 0) {
      if (errno == EINTR) continue;
      break; /* ENOMEM: stop reading; the caller waits for the exit, which kill() can bring */
    }
    if (i_in >= 0 && fds[i_in].revents) {
      ssize_t w = write(in_wr, job->in + in_off, job->in_len - in_off);
      if (w > 0) in_off += (size_t)w;
      // Written, or the plugin closed its stdin (EPIPE): either way we are done with it.
      if (in_off >= job->in_len || (w < 0 && errno != EAGAIN && errno != EINTR))
        close_fd(&in_wr);
    }
    if (i_out >= 0 && fds[i_out].revents && !drain(job, out_rd, &job->out)) close_fd(&out_rd);
    if (i_err >= 0 && fds[i_err].revents && !drain(job, err_rd, &job->err)) close_fd(&err_rd);
    if (i_pid >= 0 && fds[i_pid].revents) exited = 1;
    if (fds[n - 1].revents) {
      uint64_t count;
      if (read(job->ctl, &count, sizeof count) < 0) { /* nothing to do: only a wake-up */
      }
    }
  }
  close_fd(&in_wr);
  close_fd(&out_rd);
  close_fd(&err_rd);
}

static void run_job(job_t *job) {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if (pipe_above_std(in) < 0 || pipe_above_std(out) < 0 || pipe_above_std(err) < 0) {
    job->spawn_errno = errno;
  } else {
    job->spawn_errno = start_plugin(job, in[0], out[1], err[1]);
  }
  close_fd(&in[0]);
  close_fd(&out[1]);
  close_fd(&err[1]);
  if (job->spawn_errno == 0) {
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    int pidfd = (int)syscall(SYS_pidfd_open, job->pid, 0);
    if (pidfd >= 0) {
      pump(job, in[1], out[0], err[0], pidfd);
      close(pidfd);
    } else {
      // supported() said pidfd_open works; should it fail now, end the plugin
      // rather than leave it running untracked.
      pthread_mutex_lock(&job->mu);
      signal_group_locked(job, SIGKILL);
      pthread_mutex_unlock(&job->mu);
      close_fd(&in[1]);
      close_fd(&out[0]);
      close_fd(&err[0]);
    }
    // Wait for the exit without reaping and without the lock, so that kill() can
    // still signal the group meanwhile; then reap under the lock, at once.
    siginfo_t info;
    while (waitid(P_PID, (id_t)job->pid, &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
    }
    pthread_mutex_lock(&job->mu);
    pid_t got;
    while ((got = waitpid(job->pid, &job->wait_status, 0)) < 0 && errno == EINTR) {
    }
    // Reaped by someone else (SIGCHLD ignored): the end is unknown, and a
    // status of 0 left as it was would read as success.
    job->waited = got == job->pid;
    job->reaped = 1;
    pthread_mutex_unlock(&job->mu);
  } else {
    close_fd(&in[1]);
    close_fd(&out[0]);
    close_fd(&err[0]);
  }
  // Once the environment's teardown has begun, its tsfn may be freed at any
  // moment: the job is left to the exit then (a terminated worker leaks it).
  // Never blocks: the tsfn's queue is unbounded.
  module_t *mod = job->mod;
  pthread_mutex_lock(&mod->mu);
  if (!mod->closing) napi_call_threadsafe_function(mod->tsfn, job, napi_tsfn_blocking);
  pthread_mutex_unlock(&mod->mu);
}

static void *pool_thread(void *arg) {
  // Signals are the main thread's business; a write to a plugin that closed its
  // stdin must give EPIPE, never SIGPIPE.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  pthread_mutex_lock(&pool_mu);
  for (;;) {
    while (!queue_head) {
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_sec += POOL_IDLE_SECONDS;
      idle_threads++;
      int rc = pthread_cond_timedwait(&pool_cv, &pool_mu, &until);
      idle_threads--;
      if (rc == ETIMEDOUT && !queue_head) {
        pool_threads--;
        pthread_mutex_unlock(&pool_mu);
        return NULL;
      }
    }
    job_t *job = queue_head;
    queue_head = job->next;
    if (!queue_head) queue_tail = NULL;
    queued--;
    pthread_mutex_unlock(&pool_mu);
    run_job(job);
    pthread_mutex_lock(&pool_mu);
  }
}

/* Queues the job; a thread is added when every idle one is already spoken for. */
static int submit(job_t *job) {
  int err = 0;
  pthread_mutex_lock(&pool_mu);
  job->next = NULL;
  if (queue_tail)
    queue_tail->next = job;
  else
    queue_head = job;
  queue_tail = job;
  queued++;
  if (queued > idle_threads && pool_threads < POOL_MAX_THREADS) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t thread;
    err = pthread_create(&thread, &attr, pool_thread, NULL);
    pthread_attr_destroy(&attr);
    if (err == 0)
      pool_threads++;
    else if (pool_threads > 0)
      err = 0; /* the threads there are will get to it */
  }
  if (err) {
    // No thread at all to run it: take it back.
    job_t **p = &queue_head;
    queue_tail = NULL;
    while (*p) {
      if (*p == job) *p = job->next;
      else {
        queue_tail = *p;
        p = &(*p)->next;
      }
    }
    queued--;
  } else {
    pthread_cond_signal(&pool_cv);
  }
  pthread_mutex_unlock(&pool_mu);
  return err;
}

/* ------------------------------------------------------------------------- */
/* Back on the JavaScript thread */

static napi_value buffer_of(napi_env env, const buffer_t *b) {
  napi_value value;
  if (napi_create_buffer_copy(env, b->len, b->len ? (const void *)b->data : (const void *)"", NULL,
                              &value) != napi_ok)
    return NULL;
  return value;
}

static void deliver(napi_env env, napi_value unused, void *context, void *data) {
  job_t *job = data;
  module_t *mod = context;
  napi_value callback = NULL;
  if (env != NULL) napi_get_reference_value(env, job->callback, &callback);
  if (env != NULL && callback != NULL) {
    napi_value argv[2], undefined, null;
    napi_get_undefined(env, &undefined);
    napi_get_null(env, &null);
    if (job->spawn_errno) {
      argv[0] = errno_error(env, job->spawn_errno, "posix_spawn");
      argv[1] = undefined;
    } else {
      napi_value result, value;
      napi_create_object(env, &result);
      value = buffer_of(env, &job->out);
      napi_set_named_property(env, result, "stdout", value ? value : undefined);
      value = buffer_of(env, &job->err);
      napi_set_named_property(env, result, "stderr", value ? value : undefined);
      int status = job->wait_status;
      value = null;
      if (job->waited && WIFEXITED(status)) napi_create_int32(env, WEXITSTATUS(status), &value);
      napi_set_named_property(env, result, "exitCode", value);
      value = null;
      if (job->waited && WIFSIGNALED(status)) napi_create_int32(env, WTERMSIG(status), &value);
      napi_set_named_property(env, result, "signal", value);
      napi_get_boolean(env, job->too_much, &value);
      napi_set_named_property(env, result, "tooMuchOutput", value);
      argv[0] = undefined;
      argv[1] = result;
    }
    napi_call_function(env, undefined, callback, 2, argv, NULL);
  }
  if (env != NULL) {
    napi_delete_reference(env, job->callback);
    job->callback = NULL;
    if (--mod->inflight == 0) napi_unref_threadsafe_function(env, mod->tsfn);
  }
  // The thread is done with the job; kill() on the handle now signals nothing.
  release_io(job);
  drop_ref(job);
}

static void finalize_handle(napi_env env, void *data, void *hint) {
  drop_ref(data);
}

static int copy_string(napi_env env, napi_value value, char **out) {
  size_t len;
  if (napi_get_value_string_utf8(env, value, NULL, 0, &len) != napi_ok) return -1;
  char *s = malloc(len + 1);
  if (!s) return -1;
  napi_get_value_string_utf8(env, value, s, len + 1, &len);
  if (strlen(s) != len) {
    free(s); /* an embedded NUL would silently cut the string */
    return -1;
  }
  *out = s;
  return 0;
}

static int copy_env(napi_env env, napi_value array, char ***out) {
  bool is_array = false;
  napi_is_array(env, array, &is_array);
  if (!is_array) return -1;
  uint32_t n;
  napi_get_array_length(env, array, &n);
  char **envp = calloc((size_t)n + 1, sizeof *envp);
  if (!envp) return -1;
  *out = envp;
  for (uint32_t i = 0; i < n; i++) {
    napi_value item;
    napi_valuetype t;
    napi_get_element(env, array, i, &item);
    napi_typeof(env, item, &t);
    if (t != napi_string || copy_string(env, item, &envp[i]) < 0) return -1;
  }
  return 0;
}

/* Marks the handles spawn() returns, so that kill() accepts nothing else. */
static const napi_type_tag HANDLE_TAG = {0x8f3c2a61d94b4e07ULL, 0xb15e6a9c03d27f48ULL};

static napi_value js_spawn(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  const char *usage =
      "spawn(path: string, env: string[], stdin: Buffer, maxOutput: number, callback)";
  if (argc < 5) return throw_type(env, usage);
  napi_valuetype t;
  napi_typeof(env, argv[0], &t);
  if (t != napi_string) return throw_type(env, usage);
  bool is_buffer = false;
  napi_is_buffer(env, argv[2], &is_buffer);
  if (!is_buffer) return throw_type(env, usage);
  double max_output;
  if (napi_get_value_double(env, argv[3], &max_output) != napi_ok || !(max_output >= 0))
    return throw_type(env, usage);
  napi_typeof(env, argv[4], &t);
  if (t != napi_function) return throw_type(env, usage);

  job_t *job = calloc(1, sizeof *job);
  if (!job) return throw_errno(env, ENOMEM, "spawn");
  pthread_mutex_init(&job->mu, NULL);
  job->ctl = -1;
  job->refs = 1;
  // Infinity, or anything past SIZE_MAX, would make the conversion undefined.
  job->max_output = max_output >= (double)SIZE_MAX ? SIZE_MAX : (size_t)max_output;
  void *in;
  size_t in_len;
  napi_get_buffer_info(env, argv[2], &in, &in_len);
  if (copy_string(env, argv[0], &job->path) < 0 || copy_env(env, argv[1], &job->envp) < 0) {
    free_job(job);
    return throw_type(env, "spawn: path and env must be strings without NUL characters");
  }
  job->in = malloc(in_len ? in_len : 1);
  job->ctl = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (!job->in || job->ctl < 0) {
    int e = job->ctl < 0 ? errno : ENOMEM;
    free_job(job);
    return throw_errno(env, e, "spawn");
  }
  if (in_len) memcpy(job->in, in, in_len); /* an empty Buffer's data may be NULL */
  job->in_len = in_len;

  module_t *mod = NULL;
  napi_get_instance_data(env, (void **)&mod);
  napi_value handle;
  if (!mod || napi_create_reference(env, argv[4], 1, &job->callback) != napi_ok) {
    free_job(job);
    return throw_errno(env, ENOMEM, "spawn: callback reference");
  }
  if (napi_create_external(env, job, finalize_handle, NULL, &handle) != napi_ok ||
      napi_type_tag_object(env, handle, &HANDLE_TAG) != napi_ok) {
    napi_delete_reference(env, job->callback);
    free_job(job);
    return throw_errno(env, ENOMEM, "spawn: handle");
  }
  job->mod = mod;
  job->refs = 2; /* the handle and the coming deliver() */
  int err = submit(job);
  if (err) {
    job->refs = 1; /* the handle's finalizer frees it */
    napi_delete_reference(env, job->callback);
    job->callback = NULL;
    return throw_errno(env, err, "spawn: pthread_create");
  }
  if (mod->inflight++ == 0) napi_ref_threadsafe_function(env, mod->tsfn);
  return handle;
}

static napi_value js_kill(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  job_t *job = NULL;
  int32_t sig;
  bool ours = false;
  // Only a handle spawn() made: any other external would be read as a job.
  if (argc >= 1) napi_check_object_type_tag(env, argv[0], &HANDLE_TAG, &ours);
  if (argc < 2 || !ours || napi_get_value_external(env, argv[0], (void **)&job) != napi_ok ||
      !job || napi_get_value_int32(env, argv[1], &sig) != napi_ok || sig <= 0 || sig >= NSIG)
    return throw_type(env, "kill(handle, signal: number)");
  pthread_mutex_lock(&job->mu);
  if (job->pid == 0) job->stop_signal = sig;
  signal_group_locked(job, sig);
  if (sig == SIGKILL) __atomic_store_n(&job->abandon, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&job->mu);
  uint64_t one = 1;
  // ctl is closed once the job was delivered: there is no thread to wake then.
  if (job->ctl >= 0 && write(job->ctl, &one, sizeof one) < 0) {
    /* the counter is already non-zero: awake anyway */
  }
  return NULL;
}

static napi_value js_supported(napi_env env, napi_callback_info info) {
  int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
  if (fd >= 0) close(fd);
  napi_value value;
  napi_get_boolean(env, fd >= 0, &value);
  return value;
}

/* First of the environment's teardown; the tsfn is freed later in it. */
static void env_closing(void *arg) {
  module_t *mod = arg;
  pthread_mutex_lock(&mod->mu);
  mod->closing = 1;
  pthread_mutex_unlock(&mod->mu);
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  pin_library((void *)js_spawn);
  module_t *mod = calloc(1, sizeof *mod);
  napi_value name;
  napi_create_string_utf8(env, "cni_driver_spawn", NAPI_AUTO_LENGTH, &name);
  if (!mod || napi_create_threadsafe_function(env, NULL, NULL, name, 0, 1, NULL, NULL, mod,
                                              deliver, &mod->tsfn) != napi_ok) {
    free(mod);
    napi_throw_error(env, NULL, "cni_driver_spawn: cannot create its threadsafe function");
    return NULL;
  }
  pthread_mutex_init(&mod->mu, NULL);
  // Hooks run in reverse order of registration, so this one runs before the
  // tsfn's own (registered at its creation), and before Node frees it.
  napi_add_env_cleanup_hook(env, env_closing, mod);
  // Idle, the addon must not keep the process alive; spawn() refs it while jobs run.
  napi_unref_threadsafe_function(env, mod->tsfn);
  // Never freed: a pool thread finishing a job at exit may still read it.
  napi_set_instance_data(env, mod, NULL, NULL);
  napi_property_descriptor props[] = {
      {"supported", NULL, js_supported, NULL, NULL, NULL, napi_enumerable, NULL},
      {"spawn", NULL, js_spawn, NULL, NULL, NULL, napi_enumerable, NULL},
      {"kill", NULL, js_kill, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}
