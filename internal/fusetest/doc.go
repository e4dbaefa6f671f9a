// Package fusetest mounts, for tests, a FUSE file system whose server stops answering when
// told: what a hostile peer process could send to make this one wait for ever on an fstat
// or a close. Linux only; elsewhere it is empty.
package fusetest
