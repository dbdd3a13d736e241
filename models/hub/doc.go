// Package hub owns the remote side of modeld's model store: the hub
// protocol (revision, tree listing, resolve URLs, LFS and git blob ids), pull
// references (hf:owner/repo[:QUANT] and plain URLs), resumable and ranged
// downloads with their retries and checksum checks, the network guard that
// keeps pulls off private addresses and other hosts' credentials, and the
// size bounds (MaxDownload, free disk space) of what a pull may write.
//
// It writes the store only through the store's staging API (Store.BeginActive,
// LockPartial, CommitPartial, CommitManifest...) and runs the store's model
// file checks (models.ReadGGUF, models.PlanONNX) on what it fetched: it never
// creates a blob or manifest itself. It reads no environment variables (the
// caller passes a PullConfig) and knows nothing about the daemon.
package hub
