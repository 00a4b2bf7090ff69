package ops

import (
	"log/slog"

	"github.com/wsmux/wsmux/mux"
)

// LogResumeEvent writes e, a step of a resumable session's connection
// (mux.Config.OnResumeEvent), as one line to l, its message prefixed by
// prefix ("tunnel", "exec"...): the commands log what the library only
// reports.
func LogResumeEvent(l *slog.Logger, prefix string, e mux.ResumeEvent) {
	switch e.Kind {
	case mux.ResumeLost:
		l.Warn(prefix + ": connection lost; the session is suspended, resuming")
	case mux.ResumeResumed:
		l.Info(prefix+": session resumed on a new connection; nothing was lost", "attempt", e.Attempt)
	case mux.ResumeRefused:
		switch {
		case e.Unknown:
			l.Error(prefix+": resume refused: the server does not hold the session (it restarted, the resume timeout passed, the gateway replica holding it is gone, or a load balancer sent the resume to a replica that shares no state with it: see docs/load-balancers.md); start a new session",
				"status", e.Status, "attempt", e.Attempt)
		case e.Final():
			l.Error(prefix+": resume refused; the session is lost", "status", e.Status, "attempt", e.Attempt)
		default:
			l.Warn(prefix+": resume deferred by the server; retrying", "status", e.Status, "attempt", e.Attempt)
		}
	case mux.ResumeDialFailed:
		l.Warn(prefix+": cannot reach the server to resume; retrying until the resume timeout", "attempt", e.Attempt, "error", e.Err)
	}
}
