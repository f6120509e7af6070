// Package netfault is a fault-injecting network for real processes: a
// userspace TCP proxy on every directed link between hosts, through which
// a test (or `leasehold torture`) cuts, delays and drops traffic.
//
// A Proxy forwards the connections it accepts to one target. Each
// connection has two directions: up (from the side that opened it to the
// target) and down (the replies). Each direction has its own Faults. A Net
// names the hosts and knows which proxies carry the connections each host
// opens to each other host, so that a fault is said once, of the bytes
// between two hosts, whichever side opened the connection. A Lab builds
// the hosts: each in its own network namespace where the machine allows
// it (Linux, root), otherwise all on loopback.
//
// What the faults mean, for TCP through a proxy:
//
//   - A cut holds bytes, it does not drop them. The proxy stops passing
//     them on; the sender's writes block once the socket buffers fill, as
//     they do when a real network stops carrying a connection's packets,
//     and when the cut heals what was held is delivered, in order, as TCP
//     delivers what it retransmits once a partition heals. A connection
//     opened across a cut reaches its target only when the cut heals
//     (though the opener's connect returns at once: the proxy is local).
//     Applications notice a cut as they do a real one: their own timeouts
//     expire.
//   - A one-way cut from A to B holds every byte going from A to B, on
//     every connection between them, both those A opened and those B
//     opened, while bytes from B to A flow. On an IP network a one-way
//     packet loss breaks TCP both ways (handshakes and acknowledgements
//     need both); a message-level one-way fault is the harder case for a
//     protocol above TCP, and the one we chose: a raft leader whose
//     appends reach its followers but whose replies never come back keeps
//     them from timing out, yet cannot commit.
//   - Delay and jitter apply to each chunk (one read from the socket,
//     which on these links is mostly one message): it is delivered Delay
//     ± Jitter (uniform) after the proxy read it, but never before the
//     chunk ahead of it, so a connection's order holds, as TCP's does.
//   - Loss is modelled as TCP experiences it: a lost chunk is resent after
//     a retransmission timeout (200ms, Linux's minimum RTO, doubling when
//     the resend is lost too), and everything behind it waits. We chose
//     stalls over connection resets because packet loss on a real network
//     does not reset connections; it makes them stall.
package netfault
