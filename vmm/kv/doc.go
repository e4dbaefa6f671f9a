// Package kv is an elastic KV cache over the VMM API: per-request virtual tensors in every
// layer's K and V planes, physical pages committed as the requests' tokens grow, ahead of
// need by a background committer, so that a serving loop's step makes no driver call (as
// vAttention, ASPLOS'25, does instead of PagedAttention's block tables).
//
// A Cache has Geometry.Planes planes (a model's layers times K and V), each one reservation
// of Slots tensors of MaxTokens tokens (no device memory until used). Slot s's tensor in
// plane i starts at Plane(i) + s*SlotBytes() for the whole life of the cache: kernels take
// those addresses once.
//
// Ensure(slot, tokens) makes every page that the slot's tokens touch resident in every
// plane. Committing one page index commits it in all planes as one transaction: for each
// plane the page is created and mapped and gets its access in one call; on any failure, at
// any plane, nothing of that page index stays (no handle, mapping or page half-made).
// Committing is the driver's cost, about 60 µs per plane on an H200 (4 ms for a page index
// of 64 planes, from C as from Go), so the step path must not do it: with Options.Ahead,
// a committer goroutine keeps that many pages mapped past each active slot's tokens and in
// each free slot, and Ensure then only reads the slot (and records its pages when they
// change); the committer looks every 5 ms whether a slot came within Ahead of its mapped
// pages, rather than being woken, which would cost the step path microseconds. When the
// committer is behind, Ensure waits for it or commits itself; Stats says how often and
// for how long.
//
// Release ends a slot's request without unmapping anything: the next request of the slot
// reuses its pages (deferred reclamation); the committer gives back what a free slot holds
// past the pages it keeps ahead, so the memory held stays within the pages in use and the
// watermark. Trim gives back every page no slot uses, and Options.Limit caps the device
// memory held (the committer stops there; Ensure trims, then fails with vmm.ErrTooLarge).
//
// A Cache is safe for concurrent use: Ensure and Release of different slots, the
// committer, Trim, Stats and Close; one slot is one request's, so its Ensure and Release
// calls come from one goroutine at a time (nothing checks that: a slot's state is atomic).
// Ensure with fewer tokens than before shrinks the slot: Trim may then give back the pages
// past them. Close stops the committer and releases everything.
package kv
