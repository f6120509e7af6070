package torture

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/netfault"
)

// The partition scenarios, in turn: the target cut off from every other
// node; every other node's bytes to it held while its own flow out (a
// leader whose appends arrive but whose acknowledgements never come
// back); the target cut and healed every 700ms; every link slow and
// lossy.
var partitionScenarios = []string{"isolate", "one-way", "flap", "slow"}

// partition applies the next partition scenario around target for hold,
// then heals every link.
func (r *run) partition(ctx context.Context, f *faultRecord, target *localNode, hold time.Duration) error {
	net := r.local.lab.Net
	scenario := partitionScenarios[r.partitions%len(partitionScenarios)]
	r.partitions++
	wait := context.WithoutCancel(ctx)
	switch scenario {
	case "isolate":
		f.What = fmt.Sprintf("%s cut off from every other node for %v", target.ID, hold)
		net.Isolate(target.ID)
		sleep(wait, hold)
	case "one-way":
		f.What = fmt.Sprintf("bytes to %s held for %v, its own flowing out", target.ID, hold)
		for _, nd := range r.local.nodes {
			if nd != target {
				net.CutOneWay(nd.ID, target.ID)
			}
		}
		sleep(wait, hold)
	case "flap":
		f.What = fmt.Sprintf("%s cut off and healed every 700ms for %v", target.ID, hold)
		fctx, cancel := context.WithTimeout(wait, hold)
		net.Flap(fctx, 700*time.Millisecond, 700*time.Millisecond, func() { net.Isolate(target.ID) })
		cancel()
	case "slow":
		f.Target = "every link"
		f.What = fmt.Sprintf("every link 200ms ± 100ms late, 5%% of chunks lost, for %v", hold)
		if err := net.Shape(netfault.Faults{Delay: 200 * time.Millisecond, Jitter: 100 * time.Millisecond, Loss: 0.05}); err != nil {
			return err
		}
		sleep(wait, hold)
		net.Shape(netfault.Faults{})
	}
	net.Heal()
	return nil
}
