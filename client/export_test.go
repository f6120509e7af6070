package client

// StallRenewals makes every renewal loop of c call stall when it wakes, as
// a paused process would not run it. Set it before the first acquire.
func StallRenewals(c *Client, stall func()) { c.renewalStall = stall }
