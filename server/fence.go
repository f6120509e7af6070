package server

import (
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
)

// fencePB checks a fence at the edge: exactly one target (resource, group
// with partition, or queue with key) and a token. field prefixes the
// names in messages ("fence." in a write, "" in CheckFence).
func fencePB(f *pb.Fence, field string) (*leasehold.Fence, error) {
	if f == nil {
		return nil, nil
	}
	var named []string
	for _, t := range []struct{ name, value string }{{"resource", f.Resource}, {"group", f.Group}, {"queue", f.Queue}} {
		if t.value != "" {
			named = append(named, field+t.name)
		}
	}
	switch {
	case len(named) == 0:
		return nil, leasehold.Errorf(leasehold.CodeInvalid,
			"%sresource must not be empty: name what the token fences, %sresource, %sgroup with %spartition, or %squeue with %skey",
			field, field, field, field, field, field)
	case len(named) > 1:
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "%s and %s are both set: a fence names exactly one target", named[0], named[1])
	case f.Group == "" && f.Partition != 0:
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "%spartition is set without %sgroup", field, field)
	case f.Queue == "" && f.Key != "":
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "%skey is set without %squeue", field, field)
	}
	var err error
	switch {
	case f.Group != "":
		err = leasehold.ValidateName(field+"group", f.Group, leasehold.MaxGroupNameLen, true)
	case f.Queue != "":
		err = leasehold.ValidateName(field+"queue", f.Queue, leasehold.MaxResourceLen, true)
		if err == nil {
			err = leasehold.ValidateName(field+"key", f.Key, leasehold.MaxResourceLen, true)
		}
	default:
		err = leasehold.ValidateName(field+"resource", f.Resource, leasehold.MaxResourceLen, true)
		if err == nil {
			err = leasehold.Reserved(field+"resource", f.Resource)
		}
	}
	if err != nil {
		return nil, err
	}
	if f.Token == 0 {
		return nil, leasehold.Errorf(leasehold.CodeInvalid,
			"%stoken must be set (a lease's token, a partition's epoch or a delivery's token; 0 is never valid)", field)
	}
	return &leasehold.Fence{Resource: f.Resource, Token: f.Token, Group: f.Group, Partition: f.Partition, Queue: f.Queue, Key: f.Key}, nil
}
