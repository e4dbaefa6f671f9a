package pidfd

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/stretchr/testify/require"
)

var testSecret = [secretLen]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32}

// rawManifest lays out a manifest byte by byte, checking nothing, so that tests can write
// what no exporter would.
func rawManifest(secret [secretLen]byte, gran uint64, sizes []uint64, files []manifestFile) []byte {
	le := binary.LittleEndian
	b := []byte(manifestMagic)
	b = le.AppendUint16(b, manifestVersion)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint32(b, uint32(len(files)))
	b = append(b, secret[:]...)
	b = append(b, "CUVMMIPC"...)
	b = le.AppendUint16(b, 2) // version
	b = le.AppendUint16(b, 1) // kind: allocations
	b = le.AppendUint16(b, uint16(len(sizes)))
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, uint16(cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
	b = append(b, 0, 0, 0, 0, 0, 0)
	b = le.AppendUint64(b, gran)
	for _, s := range sizes {
		b = le.AppendUint64(b, s)
	}
	for _, f := range files {
		b = le.AppendUint32(b, uint32(f.fd))
		b = le.AppendUint32(b, 0)
		b = le.AppendUint64(b, f.dev)
		b = le.AppendUint64(b, f.ino)
	}
	return b
}

func sampleManifest() manifest {
	return manifest{
		secret: testSecret,
		header: ipc.Header{HandleType: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, Granularity: 2 << 20, Sizes: []uint64{2 << 20, 4 << 20}},
		files:  []manifestFile{{fd: 5, dev: 1, ino: 2049}, {fd: 6, dev: 1, ino: 2049}},
	}
}

func TestManifestRoundTrip(t *testing.T) {
	m := sampleManifest()
	b, err := m.encode()
	require.NoError(t, err)
	require.Equal(t, rawManifest(m.secret, m.header.Granularity, m.header.Sizes, m.files), b, "the layout the doc gives")
	got, err := decodeManifest(b, &testSecret)
	require.NoError(t, err)
	require.Equal(t, m, got)

	// The exporter writes no manifest an importer would refuse.
	bad := sampleManifest()
	bad.files = bad.files[:1]
	_, err = bad.encode()
	require.ErrorContains(t, err, "1 descriptors for 2 sizes")
	bad = sampleManifest()
	bad.header.Granularity = 3
	_, err = bad.encode()
	require.ErrorIs(t, err, ipc.ErrProtocol)
}

// A manifest from another process is refused at the first check it fails, and the refusal
// says which check, not what would have passed it.
func TestManifestRefusals(t *testing.T) {
	m := sampleManifest()
	good, err := m.encode()
	require.NoError(t, err)
	with := func(at int, v ...byte) []byte {
		b := bytes.Clone(good)
		copy(b[at:], v)
		return b
	}
	gran, sizes := m.header.Granularity, m.header.Sizes
	other := testSecret
	other[31] ^= 1
	for _, c := range []struct {
		name string
		b    []byte
		says string
	}{
		{"empty", nil, "not a ticket's manifest"},
		{"short", good[:manifestFixed-1], "not a ticket's manifest"},
		{"magic", with(0, 'X'), "not a ticket's manifest"},
		{"version", with(8, 1), "manifest version 1, want 2"},
		{"another secret", rawManifest(other, gran, sizes, m.files), "the ticket's secret is not the manifest's"},
		{"reserved", with(10, 1), "reserved bytes"},
		{"no descriptors", rawManifest(testSecret, gran, nil, nil), "manifest of 0 descriptors"},
		{"too many", with(12, 254), "manifest of 254 descriptors (1 to 253)"},
		{"longer", append(bytes.Clone(good), 0), "manifest of 145 bytes for 2 descriptors"},
		{"shorter", good[:len(good)-1], "manifest of 143 bytes for 2 descriptors"},
		{"a header of another count", with(manifestFixed+12, 1), "message of 48 bytes, want 40"},
		{"a size not of the granularity", rawManifest(testSecret, gran, []uint64{2 << 20, 3 << 20}, m.files), "size 3145728 of allocation 1"},
		{"sizes past 2^64", rawManifest(testSecret, 1, []uint64{1 << 63, 1 << 63}, m.files), "sizes overflow"},
		{"a descriptor past 2^31", with(len(good)-manifestEntry, 0, 0, 0, 0x80), "manifest entry 1 is not a descriptor"},
		{"an entry's reserved bytes", with(len(good)-manifestEntry+4, 1), "manifest entry 1 is not a descriptor"},
	} {
		_, err := decodeManifest(c.b, &testSecret)
		require.ErrorIs(t, err, ipc.ErrProtocol, c.name)
		require.ErrorContains(t, err, c.says, c.name)
		require.NotContains(t, err.Error(), "2049", c.name)
	}
}

// FuzzManifest decodes anything as a manifest whose secret is b's own (so that the fuzzer
// reaches past the comparison): what decodes holds what Fetch relies on and encodes back
// to the same bytes.
func FuzzManifest(f *testing.F) {
	good, _ := sampleManifest().encode()
	f.Add(good)
	f.Add(good[:manifestFixed])
	f.Add(rawManifest(testSecret, 1, []uint64{1 << 63, 1 << 63}, []manifestFile{{}, {}}))
	f.Add([]byte(manifestMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var want [secretLen]byte
		if len(b) >= manifestFixed {
			copy(want[:], b[16:manifestFixed])
		}
		m, err := decodeManifest(b, &want)
		if err != nil {
			require.ErrorIs(t, err, ipc.ErrProtocol)
			return
		}
		_, err = m.header.MarshalBinary()
		require.NoError(t, err, "a header a socket message could carry")
		require.Len(t, m.files, len(m.header.Sizes))
		for _, f := range m.files {
			require.True(t, f.fd >= 0 && f.fd <= 1<<31-1)
		}
		again, err := m.encode()
		require.NoError(t, err)
		require.Equal(t, b, again, "one manifest, one form")
	})
}
