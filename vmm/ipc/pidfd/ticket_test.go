package pidfd_test

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/cuvmm/cuvmm/vmm/ipc/pidfd"
	"github.com/stretchr/testify/require"
)

const (
	boot       = "6f1c2b9e-0d3a-4c5e-8f7a-1b2c3d4e5f60"
	secret     = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	sampleText = "cuvmm-pidfd-v2:pid=4242:start=900867:boot=" + boot + ":pidns=4026531836:manifest=7:secret=" + secret
)

func sampleTicket() pidfd.Ticket {
	tk, err := pidfd.ParseTicket(sampleText)
	if err != nil {
		panic(err)
	}
	return tk
}

func TestTicketText(t *testing.T) {
	tk := sampleTicket()
	require.Equal(t, pidfd.Ticket{PID: 4242, Start: 900867, Boot: boot, PIDNS: 4026531836, Manifest: 7}.String(), tk.String(),
		"the fields, and a secret that String does not show")
	text, err := tk.MarshalText()
	require.NoError(t, err)
	require.Equal(t, sampleText, string(text))

	// Logs do not show the secret, whatever the verb.
	redacted := strings.Replace(sampleText, secret, "REDACTED", 1)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		s := fmt.Sprintf(verb, tk)
		require.Equal(t, redacted, s, verb)
		require.NotContains(t, s, secret[:8], verb)
	}
	require.NotContains(t, fmt.Sprintf("%+v", struct{ T pidfd.Ticket }{tk}), secret[:8])

	// Inside JSON, as a string, with the secret: that is how it travels.
	msg, err := json.Marshal(map[string]pidfd.Ticket{"memory": tk})
	require.NoError(t, err)
	require.Equal(t, `{"memory":"`+sampleText+`"}`, string(msg))
	var back map[string]pidfd.Ticket
	require.NoError(t, json.Unmarshal(msg, &back))
	require.Equal(t, tk, back["memory"])

	// A ticket that is not valid is not encoded.
	bad := sampleTicket()
	bad.Manifest = -1
	_, err = bad.MarshalText()
	require.ErrorIs(t, err, ipc.ErrProtocol)
	require.True(t, strings.HasPrefix(bad.String(), "invalid ticket: "), bad.String())
	_, err = json.Marshal(bad)
	require.Error(t, err)
}

func TestTicketRefusesText(t *testing.T) {
	v1 := "cuvmm-pidfd-v1:pid=4242:start=900867:boot=" + boot + ":pidns=4026531836:gran=2097152:fd=5/2097152/1/2049"
	for _, c := range []struct{ text, says string }{
		{"", "does not start with"},
		{v1, "a version 1 ticket, no longer accepted"},
		{"cuvmm-pidfd-v3" + sampleText[len("cuvmm-pidfd-v2"):], "does not start with"},
		{"CUVMM-pidfd-v2" + sampleText[len("cuvmm-pidfd-v2"):], "does not start with"},
		{" " + sampleText, "does not start with"},
		{sampleText + ":", "ticket of 7 fields, want 6"},
		{sampleText + "\n", "secret is not 64 lowercase hex digits"},
		{strings.Replace(sampleText, ":secret="+secret, "", 1), "ticket of 5 fields"},
		{strings.Replace(sampleText, "pid=4242", "pid=04242", 1), `pid "04242" is not a decimal number`},
		{strings.Replace(sampleText, "pid=4242", "pid=+4242", 1), `pid "+4242"`},
		{strings.Replace(sampleText, "pid=4242", "pid=-1", 1), `pid "-1"`},
		{strings.Replace(sampleText, "pid=4242", "pid=0", 1), "pid 0 (1 to 4194304)"},
		{strings.Replace(sampleText, "pid=4242", "pid=4194305", 1), "pid 4194305 (1 to 4194304)"},
		{strings.Replace(sampleText, "pid=4242", "pid=18446744073709551616", 1), `pid "18446744073709551616"`},
		{strings.Replace(sampleText, "pid=4242", "pid=0x10", 1), `pid "0x10"`},
		{strings.Replace(sampleText, "pid=4242:start=900867", "start=900867:pid=4242", 1), "field 1 is not pid="},
		{strings.Replace(sampleText, "boot="+boot, "boot="+strings.ToUpper(boot), 1), "not a lowercase UUID"},
		{strings.Replace(sampleText, "boot="+boot, "boot="+boot[:35], 1), "not a lowercase UUID"},
		{strings.Replace(sampleText, "boot="+boot, "boot="+strings.ReplaceAll(boot, "-", "0"), 1), "not a lowercase UUID"},
		{strings.Replace(sampleText, "pidns=4026531836", "pidns=0", 1), "pid namespace 0"},
		{strings.Replace(sampleText, "manifest=7", "manifest=2147483648", 1), "manifest descriptor 2147483648"},
		{strings.Replace(sampleText, "manifest=7", "manifest=-7", 1), `manifest "-7" is not a decimal number`},
		{strings.Replace(sampleText, "manifest=7", "manifest=", 1), `manifest "" is not a decimal number`},
		{strings.Replace(sampleText, secret, strings.ToUpper(secret), 1), "secret is not 64 lowercase hex digits"},
		{strings.Replace(sampleText, secret, secret[:62], 1), "secret is not 64 lowercase hex digits"},
		{strings.Replace(sampleText, secret, secret+"00", 1), "secret is not 64 lowercase hex digits"},
		{strings.Replace(sampleText, secret, "zz"+secret[2:], 1), "secret is not 64 lowercase hex digits"},
		{strings.Repeat("x", 1<<20), "longer than any"},
	} {
		_, err := pidfd.ParseTicket(c.text)
		require.ErrorIs(t, err, ipc.ErrProtocol, "%.80q", c.text)
		require.Contains(t, err.Error(), c.says, "%.80q", c.text)
		require.NotContains(t, err.Error(), secret[8:24], "a refusal does not repeat a secret")
		var ie *vmm.Error
		require.ErrorAs(t, err, &ie)
		require.Equal(t, "pidfd", ie.Pkg)
		require.Equal(t, "decode ticket", ie.Op)
	}
	// The widest ticket.
	widest := "cuvmm-pidfd-v2:pid=4194304:start=18446744073709551615:boot=" + boot +
		":pidns=18446744073709551615:manifest=2147483647:secret=" + secret
	tk, err := pidfd.ParseTicket(widest)
	require.NoError(t, err)
	text, err := tk.MarshalText()
	require.NoError(t, err)
	require.Equal(t, widest, string(text))
	_, err = pidfd.ParseTicket(widest + "0")
	require.ErrorContains(t, err, "longer than any")
	// A failed decode leaves the ticket as it was.
	tk = sampleTicket()
	require.Error(t, tk.UnmarshalText([]byte("nonsense")))
	require.Equal(t, sampleTicket(), tk)
}

func FuzzTicket(f *testing.F) {
	f.Add(sampleText)
	f.Add("cuvmm-pidfd-v2:pid=1:start=0:boot=" + boot + ":pidns=1:manifest=0:secret=" + secret)
	f.Add(strings.Replace(sampleText, "pid=4242", "pid=04242", 1))
	f.Add("cuvmm-pidfd-v1:pid=1:start=0:boot=" + boot + ":pidns=1:gran=1:fd=0/1/0/0")
	f.Add("cuvmm-pidfd-v2:")
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		tk, err := pidfd.ParseTicket(text)
		if err != nil {
			require.ErrorIs(t, err, ipc.ErrProtocol)
			var ie *vmm.Error
			require.ErrorAs(t, err, &ie)
			require.Equal(t, pidfd.Ticket{}, tk)
			return
		}
		again, err := tk.MarshalText()
		require.NoError(t, err)
		require.Equal(t, text, string(again), "round trip: one text per ticket")
		// What Fetch relies on a decoded ticket to hold.
		require.True(t, tk.PID >= 1 && tk.PID <= 1<<22, "pid %d", tk.PID)
		require.True(t, tk.Manifest >= 0 && tk.Manifest <= 1<<31-1, "manifest %d", tk.Manifest)
		require.NotZero(t, tk.PIDNS)
		require.NotContains(t, tk.String(), text[strings.LastIndex(text, "=")+1:], "String shows no secret")
	})
}

// Off Linux the pidfd transport is unsupported, and says so.
func TestPidfdOffLinux(t *testing.T) {
	if runtime.GOOS == "linux" {
		t.Skip("Linux has pidfd_getfd")
	}
	_, err := pidfd.Fetch(sampleTicket())
	require.ErrorIs(t, err, ipc.ErrUnsupported)
	require.ErrorIs(t, err, vmm.ErrUnsupported)
	require.Contains(t, err.Error(), "pidfd_getfd is Linux's")
	_, err = pidfd.FetchAndImport(sampleTicket(), nil, nil, pidfd.AllowSelf())
	require.ErrorIs(t, err, vmm.ErrUnsupported)
	_, err = pidfd.Publish(&ipc.Exported{})
	require.ErrorIs(t, err, ipc.ErrUnsupported)
	for _, err := range []error{pidfd.AllowImporter(os.Getppid()), pidfd.AllowAnyImporter()} {
		require.ErrorIs(t, err, ipc.ErrUnsupported)
		require.ErrorIs(t, err, vmm.ErrUnsupported)
	}
}
