package client

import "time"

// now reads the client's clock (Config.Clock), on which every lease's
// local deadline is counted (invariant 3).
func (c *Client) now() time.Time { return c.cfg.Clock.Now() }

// sleepUntil waits on the client's clock until t, or until stop or done is
// closed; it reports whether t came.
func (c *Client) sleepUntil(t time.Time, stop, done <-chan struct{}) bool {
	due := make(chan struct{})
	timer := c.cfg.Clock.AfterFunc(t.Sub(c.now()), func() { close(due) })
	select {
	case <-stop:
	case <-done:
	case <-due:
		return true
	}
	timer.Stop()
	return false
}
