package ipc_test

import (
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/stretchr/testify/require"
)

const boot = "6f1c2b9e-0d3a-4c5e-8f7a-1b2c3d4e5f60"

func sampleTicket() ipc.Ticket {
	return ipc.Ticket{
		PID: 4242, Start: 900867, Boot: boot, PIDNS: 4026531836,
		Header: ipc.Header{HandleType: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, Granularity: 2 * mib, Sizes: []uint64{2 * mib, 4 * mib}},
		Files:  []ipc.TicketFile{{FD: 5, Dev: 1, Ino: 2049}, {FD: 6, Dev: 1, Ino: 2050}},
	}
}

const sampleText = "cuvmm-pidfd-v1:pid=4242:start=900867:boot=" + boot + ":pidns=4026531836:gran=2097152:fd=5/2097152/1/2049:fd=6/4194304/1/2050"

func TestTicketText(t *testing.T) {
	tk := sampleTicket()
	text, err := tk.MarshalText()
	require.NoError(t, err)
	require.Equal(t, sampleText, string(text))
	require.Equal(t, sampleText, tk.String())
	got, err := ipc.ParseTicket(sampleText)
	require.NoError(t, err)
	require.Equal(t, tk, got)

	// Inside JSON, as a string.
	msg, err := json.Marshal(map[string]ipc.Ticket{"memory": tk})
	require.NoError(t, err)
	require.Equal(t, `{"memory":"`+sampleText+`"}`, string(msg))
	var back map[string]ipc.Ticket
	require.NoError(t, json.Unmarshal(msg, &back))
	require.Equal(t, tk, back["memory"])

	// A ticket that is not valid is not encoded.
	bad := sampleTicket()
	bad.Files = bad.Files[:1]
	_, err = bad.MarshalText()
	require.ErrorIs(t, err, ipc.ErrProtocol)
	require.True(t, strings.HasPrefix(bad.String(), "invalid ticket: "), bad.String())
	_, err = json.Marshal(bad)
	require.Error(t, err)
}

func TestTicketRefusesText(t *testing.T) {
	fixed := "cuvmm-pidfd-v1:pid=4242:start=900867:boot=" + boot + ":pidns=4026531836:gran=2097152"
	one := ":fd=5/2097152/1/2049"
	for _, c := range []struct{ text, says string }{
		{"", "does not start with"},
		{"cuvmm-pidfd-v2" + sampleText[len("cuvmm-pidfd-v1"):], "does not start with"},
		{"CUVMM-pidfd-v1" + sampleText[len("cuvmm-pidfd-v1"):], "does not start with"},
		{fixed, "ticket of 5 fields"},
		{fixed + ":", `field 6 is not fd=`},
		{sampleText + ":", `field 8 is not fd=`},
		{sampleText + "\n", `is not FD/SIZE/DEV/INO`},
		{" " + sampleText, "does not start with"},
		{strings.Replace(sampleText, "pid=4242", "pid=04242", 1), `pid "04242" is not a decimal number`},
		{strings.Replace(sampleText, "pid=4242", "pid=+4242", 1), `pid "+4242"`},
		{strings.Replace(sampleText, "pid=4242", "pid=-1", 1), `pid "-1"`},
		{strings.Replace(sampleText, "pid=4242", "pid=0", 1), "pid 0 (1 to 4194304)"},
		{strings.Replace(sampleText, "pid=4242", "pid=4194305", 1), "pid 4194305 (1 to 4194304)"},
		{strings.Replace(sampleText, "pid=4242", "pid=18446744073709551616", 1), `pid "18446744073709551616"`},
		{strings.Replace(sampleText, "pid=4242", "pid=4_242", 1), `pid "4_242"`},
		{strings.Replace(sampleText, "pid=4242", "pid=0x10", 1), `pid "0x10"`},
		{strings.Replace(sampleText, "pid=4242:start=900867", "start=900867:pid=4242", 1), "field 1 is not pid="},
		{strings.Replace(sampleText, "boot="+boot, "boot="+strings.ToUpper(boot), 1), "not a lowercase UUID"},
		{strings.Replace(sampleText, "boot="+boot, "boot="+boot[:35], 1), "not a lowercase UUID"},
		{strings.Replace(sampleText, "boot="+boot, "boot="+strings.ReplaceAll(boot, "-", "0"), 1), "not a lowercase UUID"},
		{strings.Replace(sampleText, "pidns=4026531836", "pidns=0", 1), "pid namespace 0"},
		{strings.Replace(sampleText, "gran=2097152", "gran=3", 1), "granularity 3 is not a power of two"},
		{strings.Replace(sampleText, "gran=2097152", "gran=0", 1), "granularity 0"},
		{strings.Replace(sampleText, "5/2097152/1/2049", "5/0/1/2049", 1), "size 0 of allocation 0"},
		{strings.Replace(sampleText, "5/2097152/1/2049", "5/1048576/1/2049", 1), "size 1048576 of allocation 0"},
		{strings.Replace(sampleText, "5/2097152/1/2049", "-5/2097152/1/2049", 1), "is not FD/SIZE/DEV/INO"},
		{strings.Replace(sampleText, "5/2097152/1/2049", "2147483648/2097152/1/2049", 1), "descriptor 2147483648 of file 0"},
		{strings.Replace(sampleText, "5/2097152/1/2049", "5/2097152/1", 1), "is not FD/SIZE/DEV/INO"},
		{strings.Replace(sampleText, "5/2097152/1/2049", "5/2097152/1/2049/0", 1), "is not FD/SIZE/DEV/INO"},
		{strings.Replace(sampleText, "5/2097152/1/2049", "5//1/2049", 1), "is not FD/SIZE/DEV/INO"},
		{fixed + ":fd=5/9223372036854775808/1/1:fd=6/9223372036854775808/1/1", "sizes overflow"},
		{fixed + strings.Repeat(one, 254), "ticket of 259 fields"},
		{fixed + strings.Repeat(":fd=2147483647/18446744073709551615/18446744073709551615/18446744073709551615", 254), "longer than any"},
		{strings.Repeat("x", 1<<20), "longer than any"},
	} {
		_, err := ipc.ParseTicket(c.text)
		require.ErrorIs(t, err, ipc.ErrProtocol, "%.80q", c.text)
		require.Contains(t, err.Error(), c.says, "%.80q", c.text)
		var ie *vmm.Error
		require.ErrorAs(t, err, &ie)
		require.Equal(t, "ipc", ie.Pkg)
		require.Equal(t, "decode ticket", ie.Op)
	}
	// The most a ticket holds, at its widest.
	widest := "cuvmm-pidfd-v1:pid=4194304:start=18446744073709551615:boot=" + boot +
		":pidns=18446744073709551615:gran=1" + strings.Repeat(":fd=2147483647/1/18446744073709551615/18446744073709551615", ipc.MaxDescriptors)
	tk, err := ipc.ParseTicket(widest)
	require.NoError(t, err)
	require.Len(t, tk.Files, ipc.MaxDescriptors)
	require.Equal(t, widest, tk.String())
	// A failed decode leaves the ticket as it was.
	tk = sampleTicket()
	require.Error(t, tk.UnmarshalText([]byte("nonsense")))
	require.Equal(t, sampleTicket(), tk)
}

func FuzzTicket(f *testing.F) {
	f.Add(sampleText)
	f.Add("cuvmm-pidfd-v1:pid=1:start=0:boot=" + boot + ":pidns=1:gran=1:fd=0/1/0/0")
	f.Add(sampleText + ":fd=7/2097152/0/0")
	f.Add(strings.Replace(sampleText, "pid=4242", "pid=04242", 1))
	f.Add(strings.Replace(sampleText, "5/2097152", "5/9223372036854775808", 1))
	f.Add("cuvmm-pidfd-v1:")
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		tk, err := ipc.ParseTicket(text)
		if err != nil {
			require.ErrorIs(t, err, ipc.ErrProtocol)
			var ie *vmm.Error
			require.ErrorAs(t, err, &ie)
			require.Equal(t, ipc.Ticket{}, tk)
			return
		}
		again, err := tk.MarshalText()
		require.NoError(t, err)
		require.Equal(t, text, string(again), "round trip: one text per ticket")
		// What Fetch relies on a decoded ticket to hold.
		require.True(t, tk.PID >= 1 && tk.PID <= 1<<22, "pid %d", tk.PID)
		require.Equal(t, cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, tk.Header.HandleType)
		n := len(tk.Files)
		require.True(t, n >= 1 && n <= ipc.MaxDescriptors, "%d descriptors", n)
		require.Len(t, tk.Header.Sizes, n)
		var total uint64
		for i, f := range tk.Files {
			require.True(t, f.FD >= 0 && f.FD <= 1<<31-1, "descriptor %d", f.FD)
			s := tk.Header.Sizes[i]
			require.True(t, s > 0 && s%tk.Header.Granularity == 0)
			require.GreaterOrEqual(t, total+s, total, "sizes overflow")
			total += s
		}
		// The header it carries is one a socket message could carry.
		b, err := tk.Header.MarshalBinary()
		require.NoError(t, err)
		var h ipc.Header
		require.NoError(t, h.UnmarshalBinary(b))
	})
}

// Off Linux the pidfd transport is unsupported, and says so.
func TestPidfdOffLinux(t *testing.T) {
	if runtime.GOOS == "linux" {
		t.Skip("Linux has pidfd_getfd")
	}
	_, err := ipc.Fetch(sampleTicket())
	require.ErrorIs(t, err, ipc.ErrUnsupported)
	require.ErrorIs(t, err, vmm.ErrUnsupported)
	require.Contains(t, err.Error(), "pidfd_getfd is Linux's")
	_, err = ipc.FetchAndImport(sampleTicket(), nil, nil)
	require.ErrorIs(t, err, vmm.ErrUnsupported)
	_, err = ipc.NewTicket(sampleTicket().Header, []int{5, 6})
	require.ErrorIs(t, err, ipc.ErrUnsupported)
	_, err = (&ipc.Exported{}).Ticket()
	require.ErrorIs(t, err, ipc.ErrUnsupported)
	for _, err := range []error{ipc.AllowImporter(os.Getppid()), ipc.AllowAnyImporter()} {
		require.ErrorIs(t, err, ipc.ErrUnsupported)
		require.ErrorIs(t, err, vmm.ErrUnsupported)
	}
}
