// Package clientaddr says who a request's client is when the server may sit
// behind reverse proxies: the TCP peer, unless the peer is one of the
// operator's trusted proxies, in which case the right-most address of
// X-Forwarded-For that is not itself a trusted proxy. A header from a peer
// that is not trusted is never read, so a client cannot choose its own
// address by sending one (docs/SPEC.md section 6, "Abuse limits").
//
// Handler rewrites http.Request.RemoteAddr to the client's address, so
// that everything after it (the abuse limits' keys, the loopback checks of
// /metrics and the console, the request log) sees the client rather than
// the proxy, and keeps the peer for the log (Peer).
package clientaddr
