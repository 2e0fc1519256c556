/* pause: the process that holds a pod sandbox's namespaces open.
 *
 * Same contract as Kubernetes' pause: sleep until SIGINT or SIGTERM, then
 * exit 0; as PID 1 of a shared PID namespace, reap every orphan that is
 * re-parented to it so that zombies do not pile up in the pod.
 *
 * All work is done in the signal handlers, with async-signal-safe calls only
 * (write, waitpid, _exit), so the main loop can be a bare pause(): a signal
 * that arrives between two pause() calls has already been handled.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PAUSE_VERSION
#define PAUSE_VERSION "nanolet-pause 3.9"
#endif

static void say (const char *s)
{
  /* Nothing to do if stderr is gone; a pause process must not die of it. */
  ssize_t r = write (STDERR_FILENO, s, strlen (s));
  (void) r;
}

static void sigdown (int signo)
{
  say (signo == SIGINT ? "Shutting down, got signal: Interrupt\n"
                       : "Shutting down, got signal: Terminated\n");
  _exit (0);
}

static void sigreap (int signo)
{
  int saved_errno = errno;
  (void) signo;
  while (waitpid (-1, NULL, WNOHANG) > 0)
    ;
  errno = saved_errno;
}

int main (int argc, char **argv)
{
  struct sigaction sa;
  int i;

  for (i = 1; i < argc; i++)
    {
      if (strcmp (argv[i], "-v") == 0)
        {
          ssize_t r = write (STDOUT_FILENO, PAUSE_VERSION "\n",
                             sizeof PAUSE_VERSION);
          return r < 0 ? 1 : 0;
        }
    }

  if (getpid () != 1)
    /* Not an error: it still pauses, as upstream does; reaping only matters
     * in a shared PID namespace, where it is PID 1. */
    say ("Warning: pause should be the first process\n");

  memset (&sa, 0, sizeof sa);
  sigemptyset (&sa.sa_mask);
  sa.sa_handler = sigdown;
  if (sigaction (SIGINT, &sa, NULL) < 0 || sigaction (SIGTERM, &sa, NULL) < 0)
    return 1;

  /* SA_RESTART keeps pause() the only call that sees EINTR; SA_NOCLDSTOP
   * because a stopped child has nothing to reap. */
  sa.sa_handler = sigreap;
  sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  if (sigaction (SIGCHLD, &sa, NULL) < 0)
    return 2;

  for (;;)
    pause ();
  /* Unreachable: only a signal handler ends this process. */
  return 42;
}
