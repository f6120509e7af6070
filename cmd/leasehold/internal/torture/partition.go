package torture

import (
	"context"
	"errors"
	"time"
)

// partition cuts target off from the other nodes for hold, then heals.
func (r *run) partition(ctx context.Context, f *faultRecord, target *localNode, hold time.Duration) error {
	f.What = "isolate " + target.ID
	return errors.New("partitions are not available in this build")
}
