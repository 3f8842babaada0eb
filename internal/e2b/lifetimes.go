package e2b

import (
	"context"
	"net/http"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// errNoLifetimes answers a call that moves a sandbox's expiry on a server
// built without Config.Lifetimes.
var errNoLifetimes = &controlError{http.StatusNotImplemented, "changing a sandbox's timeout is not supported by this server"}

// extend makes owner's sandbox id expire ttl from now (setTimeout),
// waiting no longer than ctx, the request's.
func (s *Server) extend(ctx context.Context, owner, id string, ttl time.Duration) error {
	if s.cfg.Lifetimes == nil {
		return errNoLifetimes
	}
	info, err := s.cfg.Lifetimes.SetExpiry(ctx, owner, id, ttl)
	if err != nil {
		return err
	}
	s.setEndAt(id, info.ExpiresAt)
	return nil
}

// extendOnly makes the sandbox of info live at least ttl from now, within
// the server's ceiling on a session's life, and never shortens it
// (connect), waiting no longer than ctx. Without Lifetimes it leaves the
// expiry alone.
func (s *Server) extendOnly(ctx context.Context, owner string, info sandbox.Info, ttl time.Duration) error {
	if s.cfg.Lifetimes == nil {
		return nil
	}
	now := time.Now()
	target := now.Add(ttl)
	if maxTTL, _ := s.cfg.Lifetimes.LifeCaps(); maxTTL > 0 && target.After(info.CreatedAt.Add(maxTTL)) {
		target = info.CreatedAt.Add(maxTTL)
	}
	if !target.After(info.ExpiresAt) || !target.After(now) {
		return nil
	}
	return s.extend(ctx, owner, info.ID, target.Sub(now))
}

// setEndAt records a sandbox's new expiry in a new copy of it.
func (s *Server) setEndAt(id string, end time.Time) {
	if sb := s.sandboxes.peek(id); sb != nil {
		c := *sb
		c.EndAt = end
		s.sandboxes.replace(&c)
	}
}

// sessionLife is the TTL and idle timeout of a new sandbox's session:
// E2B's timeout is the session's TTL, and since E2B has no idle timeout
// the session gets the longest one the server allows (--max-idle-timeout),
// so it ends at its timeout unless left unused for that long. Past the
// server's ceiling on a session's life the timeout is refused, naming it.
func (s *Server) sessionLife(ttl time.Duration) (time.Duration, time.Duration, error) {
	if s.cfg.Lifetimes == nil {
		return ttl, 0, nil
	}
	maxTTL, maxIdle := s.cfg.Lifetimes.LifeCaps()
	if maxTTL > 0 && ttl > maxTTL {
		return 0, 0, badRequest("timeout: %d seconds is more than this server allows, %d (warden serve --max-ttl): ask for less",
			int64(ttl/time.Second), int64(maxTTL/time.Second))
	}
	return ttl, maxIdle, nil
}

// contextWithTimeout is a fresh context for cleanup that must outlive the
// request that started it.
func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
