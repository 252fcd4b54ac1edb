-- sluice.lua: a Wireshark/tshark dissector for sluice's transport header
-- (proto/wire.h): the 48-byte header after UDP port 0x51ce, the ACK body
-- with its SACK bitmap, the payload and the optional CRC32C trailer.
--
--   tshark -X lua_script:tools/sluice.lua -r capture.pcapng -Y sluice.flags.retx==1
--   wireshark -X lua_script:tools/sluice.lua capture.pcapng
-- or copy it into ~/.local/lib/wireshark/plugins/.

local sluice = Proto("sluice", "sluice collective transport")

local types = { [1] = "DATA", [2] = "ACK", [3] = "LAST" } -- LAST: a control message outside the PSN stream
local kinds = { [1] = "allreduce", [2] = "allgather", [3] = "reduce_scatter", [4] = "broadcast",
                [5] = "reduce", [6] = "alltoall", [7] = "barrier", [8] = "send", [9] = "recv",
                [10] = "gather", [11] = "scatter", [12] = "alltoallv" }
local algos = { [0] = "default", [1] = "ring", [2] = "direct", [3] = "rd", [4] = "rhd", [5] = "tree", [6] = "pairwise" }

local f = sluice.fields
f.version = ProtoField.uint8("sluice.version", "Version")
f.type = ProtoField.uint8("sluice.type", "Type", base.DEC, types)
f.flags = ProtoField.uint16("sluice.flags", "Flags", base.HEX)
f.retx = ProtoField.bool("sluice.flags.retx", "Retransmission", 16, nil, 0x0001)
f.ctrl = ProtoField.bool("sluice.flags.ctrl", "Control message", 16, nil, 0x0002)
f.void = ProtoField.bool("sluice.flags.void", "Void (cancelled message)", 16, nil, 0x0004)
f.crcflag = ProtoField.bool("sluice.flags.crc", "CRC32C trailer", 16, nil, 0x0008)
f.probe = ProtoField.bool("sluice.flags.probe", "Path probe", 16, nil, 0x0010)
f.dsack = ProtoField.bool("sluice.flags.dsack", "Duplicate DATA arrived (ACK)", 16, nil, 0x0020)
f.hold = ProtoField.bool("sluice.flags.hold", "Receiver holds the window (ACK)", 16, nil, 0x0040)
f.acknow = ProtoField.bool("sluice.flags.ack_now", "Answer with an ACK at once (DATA)", 16, nil, 0x0080)
f.path = ProtoField.uint16("sluice.flags.path", "Path", base.DEC, nil, 0x0f00)
f.park = ProtoField.bool("sluice.flags.park", "Sender parks calls comm/seq on (ACK)", 16, nil, 0x1000)
-- parks in slots 4-63: offset lists them, step names one, count holds its comm (high) and seq (low)
f.park_more = ProtoField.bool("sluice.flags.park_more", "More parks in offset/step/count (ACK)", 16, nil, 0x2000)
-- DATA of a send: its sender parks sends; ACK with park_more: the named slot parks sends (the pair's seq)
f.sends_park = ProtoField.bool("sluice.flags.sends_park", "Sends park (DATA: sender parks them; ACK: named slot)", 16, nil, 0x4000)
f.src_node = ProtoField.uint16("sluice.src_node", "Source node")
f.dst_node = ProtoField.uint16("sluice.dst_node", "Destination node")
f.psn = ProtoField.uint32("sluice.psn", "PSN (on an ACK: its ACK number, which orders its sender's ACKs)")
f.comm = ProtoField.uint32("sluice.comm", "Communicator", base.HEX)
f.seq = ProtoField.uint32("sluice.seq", "Collective sequence")
f.step = ProtoField.uint16("sluice.step", "Step")
-- the dataplane packs the algorithm above the opcode, and a root in the count's top byte
f.kind_byte = ProtoField.uint8("sluice.kind_byte", "Kind", base.HEX)
f.kind = ProtoField.uint8("sluice.kind", "Collective", base.DEC, kinds, 0x1f)
f.algo = ProtoField.uint8("sluice.algo", "Algorithm", base.DEC, algos, 0xe0)
f.dtype_op = ProtoField.uint8("sluice.dtype_op", "Datatype and op", base.HEX)
f.dtype = ProtoField.uint8("sluice.dtype", "Datatype", base.DEC, nil, 0xf0)
f.op = ProtoField.uint8("sluice.op", "Reduction op", base.DEC, nil, 0x0f)
f.count = ProtoField.uint64("sluice.count", "Count field")
f.root = ProtoField.uint8("sluice.root", "Root rank (rooted collectives)")
f.elements = ProtoField.uint64("sluice.elements", "Element count")
f.offset = ProtoField.uint64("sluice.offset", "Byte offset")
f.len = ProtoField.uint32("sluice.len", "Body length")
f.ts = ProtoField.uint32("sluice.ts", "Sender timestamp (us)")
f.cum_psn = ProtoField.uint32("sluice.ack.cum_psn", "Cumulative PSN")
f.echo_ts = ProtoField.uint32("sluice.ack.echo_ts", "Echoed timestamp (us)")
f.credit = ProtoField.uint32("sluice.ack.credit", "Credit (packets)")
f.ack_ce = ProtoField.uint16("sluice.ack.ce", "CE-marked DATA since the last ACK")
f.echo_path = ProtoField.uint8("sluice.ack.echo_path", "Echoed path (255: none)")
f.ack_parks = ProtoField.uint8("sluice.ack.parks", "Parks: slots 0-3 in use (bits 0-3), the named one (bits 4-5)", base.HEX)
f.sack = ProtoField.uint64("sluice.ack.sack", "SACK word", base.HEX)
f.sacked = ProtoField.uint32("sluice.ack.sacked_psn", "SACKed PSN")
f.nsacked = ProtoField.uint32("sluice.ack.sacked", "PSNs SACKed")
f.payload = ProtoField.bytes("sluice.payload", "Payload")
f.crc = ProtoField.uint32("sluice.crc", "CRC32C", base.HEX)

local HDR_LEN, ACK_LEN = 48, 48

-- The SACK bitmap: bit i of word i/64 says PSN cum_psn + 1 + i arrived.
local function dissect_ack(buf, tree)
	local t = tree:add(buf(0, ACK_LEN), "ACK")
	local cum = buf(0, 4):uint()
	t:add(f.cum_psn, buf(0, 4))
	t:add(f.echo_ts, buf(4, 4))
	t:add(f.credit, buf(8, 4))
	t:add(f.ack_ce, buf(12, 2))
	t:add(f.echo_path, buf(14, 1))
	t:add(f.ack_parks, buf(15, 1))
	local n = 0
	for w = 0, 3 do
		local word = buf(16 + 8 * w, 8)
		local st = t:add(f.sack, word)
		local v = word:uint64()
		for b = 0, 63 do
			if v:rshift(b):band(1):tonumber() == 1 then
				st:add(f.sacked, word, (cum + 1 + 64 * w + b) % 4294967296)
				n = n + 1
			end
		end
	end
	t:add(f.nsacked, buf(16, 32), n)
	return cum, n
end

function sluice.dissector(buf, pinfo, tree)
	if buf:len() < HDR_LEN then
		return 0
	end
	pinfo.cols.protocol = "sluice"
	local t = tree:add(sluice, buf(0, HDR_LEN), "sluice")
	local ty, flags, body = buf(1, 1):uint(), buf(2, 2):uint(), buf(40, 4):uint()
	t:add(f.version, buf(0, 1))
	t:add(f.type, buf(1, 1))
	local ft = t:add(f.flags, buf(2, 2))
	ft:add(f.retx, buf(2, 2))
	ft:add(f.ctrl, buf(2, 2))
	ft:add(f.void, buf(2, 2))
	ft:add(f.crcflag, buf(2, 2))
	ft:add(f.probe, buf(2, 2))
	ft:add(f.dsack, buf(2, 2))
	ft:add(f.hold, buf(2, 2))
	ft:add(f.acknow, buf(2, 2))
	ft:add(f.path, buf(2, 2))
	ft:add(f.park, buf(2, 2))
	ft:add(f.park_more, buf(2, 2))
	ft:add(f.sends_park, buf(2, 2))
	t:add(f.src_node, buf(4, 2))
	t:add(f.dst_node, buf(6, 2))
	t:add(f.psn, buf(8, 4))
	t:add(f.comm, buf(12, 4))
	t:add(f.seq, buf(16, 4))
	t:add(f.step, buf(20, 2))
	local kt = t:add(f.kind_byte, buf(22, 1))
	kt:add(f.kind, buf(22, 1))
	kt:add(f.algo, buf(22, 1))
	local dt = t:add(f.dtype_op, buf(23, 1))
	dt:add(f.dtype, buf(23, 1))
	dt:add(f.op, buf(23, 1))
	local ct = t:add(f.count, buf(24, 8))
	ct:add(f.root, buf(24, 1))
	ct:add(f.elements, buf(25, 7), buf(25, 7):uint64())
	t:add(f.offset, buf(32, 8))
	t:add(f.len, buf(40, 4))
	t:add(f.ts, buf(44, 4))

	local rest = buf:len() - HDR_LEN -- a snapped capture keeps less than body
	local info = string.format("%s %d>%d %s=%d", types[ty] or "type?", buf(4, 2):uint(), buf(6, 2):uint(),
		ty == 2 and "no" or "psn", buf(8, 4):uint())
	if ty == 2 and rest >= ACK_LEN then
		local cum, n = dissect_ack(buf(HDR_LEN, ACK_LEN), t)
		info = string.format("%s cum=%d sacked=%d", info, cum, n)
	elseif ty == 1 or ty == 3 then
		info = string.format("%s comm=0x%08x seq=%d %s step=%d off=%s len=%d", info, buf(12, 4):uint(),
			buf(16, 4):uint(), kinds[bit.band(buf(22, 1):uint(), 0x1f)] or "kind?", buf(20, 2):uint(),
			tostring(buf(32, 8):uint64()), body)
		if math.min(rest, body) > 0 then
			t:add(f.payload, buf(HDR_LEN, math.min(rest, body)))
		end
	end
	if bit.band(flags, 1) ~= 0 then
		info = info .. " RETX"
	end
	if bit.band(flags, 8) ~= 0 and rest >= body + 4 then
		t:add(f.crc, buf(HDR_LEN + body, 4))
	end
	pinfo.cols.info = info
	return buf:len()
end

DissectorTable.get("udp.port"):add(0x51ce, sluice)
