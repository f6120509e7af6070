package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// leasehold snapshot save|restore|inspect: backups of the whole state,
// like etcdctl snapshot. The file format is cluster.BackupHeader's.

func newSnapshot(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Back up a running node's state to a file, inspect a backup, or restore one into a new node",
	}
	cmd.AddCommand(newSnapshotSave(g), newSnapshotRestore(), newSnapshotInspect())
	return cmd
}

// backupOut is a backup file's header as save and inspect print it.
func backupOut(file string, h cluster.BackupHeader) cliout.Backup {
	return cliout.Backup{File: file, Index: h.Index, Term: h.Term, Format: h.Format, Size: h.Size, SHA256: h.SHA256,
		NodeID: h.NodeID, TakenAt: cliout.Time(h.TakenAt), LastToken: h.LastToken}
}

func newSnapshotSave(g *globals) *cobra.Command {
	var o *output
	cmd := &cobra.Command{
		Use:   "save FILE",
		Short: "Write the state of the leader to FILE, checksummed (admin role)",
		Long: "Streams the whole state of the leader, as of one applied index, into FILE.tmp, checks\n" +
			"its SHA-256, fsyncs and renames it to FILE. The file starts with a header (index, term,\n" +
			"format, size, SHA-256, the node that answered). Any node may be named in --endpoints:\n" +
			"save finds the leader itself. Without a leader (no quorum), the node asked answers.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, err := g.session(cmd, 0)
			if err != nil {
				return err
			}
			defer cancel()
			file := args[0]
			h, err := saveSnapshot(file, func(open func(cluster.BackupHeader) (io.Writer, error)) error {
				_, err := c.Snapshot(ctx, func(info client.SnapshotInfo) (io.Writer, error) {
					return open(cluster.BackupHeader{Index: info.Index, Term: info.Term, Format: info.Format, Size: info.Size,
						SHA256: info.SHA256, NodeID: info.NodeID, TakenAt: info.TakenAt, LastToken: info.LastToken})
				})
				return err
			})
			if err != nil {
				return err
			}
			out := backupOut(file, h)
			return o.print(cmd.OutOrStdout(), out, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "saved %s: index %d, term %d, %s, sha256 %s, from node %s\n",
					file, out.Index, out.Term, plural(out.Size, "byte", ""), out.SHA256, out.NodeID)
				return err
			})
		},
	}
	o = addOutput(cmd)
	return cmd
}

// saveSnapshot writes a backup file: fetch streams the state, calling open
// with the header (size and checksum) the node sends first, and the state
// goes after it. The file is written as FILE.tmp, fsynced, checked again
// and renamed, so FILE is whole or absent.
func saveSnapshot(file string, fetch func(open func(cluster.BackupHeader) (io.Writer, error)) error) (cluster.BackupHeader, error) {
	tmp := file + ".tmp"
	var h cluster.BackupHeader
	var out *os.File
	defer func() {
		if out != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
	err := fetch(func(head cluster.BackupHeader) (io.Writer, error) {
		h = head
		f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, err
		}
		out = f
		return f, cluster.WriteBackupHeader(f, h)
	})
	if err == nil {
		err = out.Sync()
	}
	if err != nil {
		return h, fmt.Errorf("snapshot save: %w (nothing written to %s)", err, file)
	}
	if err := out.Close(); err != nil {
		return h, fmt.Errorf("snapshot save: write %s: %w", tmp, err)
	}
	out = nil
	if _, _, err := cluster.ReadBackup(tmp); err != nil {
		os.Remove(tmp)
		return h, fmt.Errorf("snapshot save: the file written does not check: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		os.Remove(tmp)
		return h, err
	}
	if d, err := os.Open(filepath.Dir(file)); err == nil {
		d.Sync()
		d.Close()
	}
	return h, nil
}

// readBackup reads and checks a backup file. A FILE argument that names no
// file is a usage mistake (exit 2); a damaged file is any other failure
// (exit 1): the command line was right, the file is not.
func readBackup(file string) (cluster.BackupHeader, []byte, error) {
	h, state, err := cluster.ReadBackup(file)
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil, usagef("no backup file %s", file)
	}
	return h, state, err
}

func newSnapshotInspect() *cobra.Command {
	var o *output
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Check a backup's checksum and print its index, size and counts",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, state, err := readBackup(args[0])
			if err != nil {
				return err
			}
			inv, err := cluster.InspectBackup(state)
			if err != nil {
				return fmt.Errorf("backup %s passes its checksum but its state cannot be read: %w", args[0], err)
			}
			out := cliout.BackupInspected{Backup: backupOut(args[0], h), Leases: inv.Leases, Waiters: inv.Waiters, Keys: inv.Keys,
				Elections: inv.Elections, Semaphores: inv.Semaphores, IdempotencyKeys: inv.IdemKeys, Queues: inv.Queues}
			return o.print(cmd.OutOrStdout(), out, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "file:        %s\nindex:       %d\nterm:        %d\nformat:      %d\nsize:        %s\nsha256:      %s (checked)\n"+
					"node:        %s\ntaken at:    %s\nlast token:  %d\nleases:      %d\nwaiters:     %d\nkeys:        %d\n"+
					"elections:   %d\nsemaphores:  %d\nidempotency: %s\nqueues:      %d\n",
					out.File, out.Index, out.Term, out.Format, plural(out.Size, "byte", ""), out.SHA256, out.NodeID, out.TakenAt, out.LastToken,
					out.Leases, out.Waiters, out.Keys, out.Elections, out.Semaphores, plural(out.IdempotencyKeys, "key", ""), out.Queues)
				return err
			})
		},
	}
	o = addOutput(cmd)
	return cmd
}

func newSnapshotRestore() *cobra.Command {
	var dataDir, nodeID, advertise string
	var bump uint64
	var o *output
	cmd := &cobra.Command{
		Use:   "restore FILE --data-dir DIR [--node-id ID] [--advertise ADDR]",
		Short: "Seed a new node's empty data dir from a backup: a new one-node cluster with the backup's state",
		Long: "Checks FILE's checksum and state, then writes into DIR (which must be new or empty) a\n" +
			"new cluster of one voter, --node-id at --advertise (serve's --advertise, or its\n" +
			"--raft-addr), holding the backup's state. The new node is no member of the old\n" +
			"cluster. Its token floor is --bump-tokens above the backup's largest token, so every\n" +
			"grant after the restore has a larger token than any the old cluster gave, including\n" +
			"grants made after the backup (raise --bump-tokens above how many the old cluster made\n" +
			"since). Start it with `leasehold serve --data-dir DIR --node-id ID`; add nodes with\n" +
			"`leasehold cluster add` as for any cluster.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dataDir == "" {
				return usagef("--data-dir is required: the new node's data directory (new or empty)")
			}
			h, state, err := readBackup(args[0])
			if err != nil {
				return err
			}
			floor := h.LastToken + 1 + bump
			seed := cluster.Seed{NodeID: nodeID, Advertise: advertise, Index: h.Index, Term: h.Term, State: state, TokenFloor: floor}
			if err := cluster.SeedDataDir(dataDir, seed); err != nil {
				return err
			}
			out := cliout.Restored{File: args[0], DataDir: dataDir, NodeID: nodeID, Advertise: advertise, Index: h.Index, TokenFloor: floor}
			return o.print(cmd.OutOrStdout(), out, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "restored %s (index %d) into %s: a new cluster of node %s at %s; tokens from now on are at least %d\n"+
					"start it with: leasehold serve --data-dir %s --node-id %s --raft-addr %s\n",
					out.File, out.Index, out.DataDir, nodeID, advertise, floor, dataDir, nodeID, advertise)
				return err
			})
		},
	}
	o = addOutput(cmd)
	fl := cmd.Flags()
	fl.StringVar(&dataDir, "data-dir", "", "the new node's data directory (must be new or empty)")
	fl.StringVar(&nodeID, "node-id", "n1", "the new node's id")
	fl.StringVar(&advertise, "advertise", "127.0.0.1:7421", "the new node's raft address as other nodes dial it (serve's --advertise or --raft-addr)")
	fl.Uint64Var(&bump, "bump-tokens", cluster.RestoreTokenBump, "start tokens this far above the backup's largest")
	return cmd
}
