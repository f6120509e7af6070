//go:build !linux

package netfault

import "errors"

var errNoNetns = errors.New("netfault: network namespaces need Linux")

// NewNetnsLab needs Linux's network namespaces.
func NewNetnsLab(hosts int, services []string, seed uint64) (*Lab, error) { return nil, errNoNetns }

func inNetns(ns string, f func() error) error { return errNoNetns }
