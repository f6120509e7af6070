package service

import (
	"context"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fsm"
)

// Put writes a key (fenced and conditional as cmd says) and returns its new
// version.
func (s *Service) Put(ctx context.Context, cmd *fsm.Put) (uint64, error) {
	return s.write(ctx, cmd)
}

// Delete removes a key and returns its last version.
func (s *Service) Delete(ctx context.Context, cmd *fsm.Delete) (uint64, error) {
	return s.write(ctx, cmd)
}

func (s *Service) write(ctx context.Context, cmd fsm.Command) (uint64, error) {
	res, err := s.node.Propose(ctx, cmd)
	if err == nil {
		err = res.Err
	}
	return res.Version, err
}

// Get reads a key's value and version.
func (s *Service) Get(ctx context.Context, key string) (value []byte, version uint64, err error) {
	var it fsm.Item
	var found bool
	if err := s.node.Read(ctx, func(st *fsm.State) { it, found = st.Get(key) }); err != nil {
		return nil, 0, err
	}
	if !found {
		return nil, 0, leasehold.Errorf(leasehold.CodeNotFound, "key %q does not exist", key)
	}
	return it.Value, it.Version, nil
}

// CheckFence says whether token is still current for resource (nil) or
// stale (leasehold.ErrStaleToken).
func (s *Service) CheckFence(ctx context.Context, resource string, token uint64) error {
	var verdict error
	if err := s.node.Read(ctx, func(st *fsm.State) { verdict = st.CheckFence(resource, token) }); err != nil {
		return err
	}
	return verdict
}
