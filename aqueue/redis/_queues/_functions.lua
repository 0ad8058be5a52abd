-- aqueue's queues on the server: the second part of the `aqueue` function library
-- (aqueue/redis/_core/_library.py loads the core part, this one, then the replay
-- tables' part, as one library, with FUNCTION LOAD). Every state change of a queue is
-- one of these functions, so it is atomic. One concept, the queue engine on the server:
-- its length (over 450 lines) is its functions and their shared steps (take, put,
-- leave, reap, wake), which belong together. Keys (P = "aq:{name}:", KEYS[1] = P.."meta"):
--   meta        hash: gen kind capacity mad dtypes shapes names format closed cancel
--               enq deq peak
--   e:<ref>     the payload (a string) of one element of 1 KiB or more, stored once;
--               it does not pass through Lua. A producer writes it with MSET in the same MULTI/EXEC as
--               the aq_put call that admits it or deletes it, so a crashed producer
--               leaves no payload key behind. A take renames it to e:<L>.<j> (the j-th
--               element of lease L), where the consumer's MGET, pipelined behind the
--               take, reads it; the ack deletes it.
--   items       FIFO only: list of entries, head first: a ref, or a payload shorter
--               than 1 KiB itself (it starts with "AQ"; refs are hex): below that
--               size a key per element costs the server more than Lua does
--   slots       shuffle only: hash 0..size-1 -> entry, the pool a take picks from
--   lease:<L>   number of elements lease L holds (e:<L>.1 .. e:<L>.<count>), until ack
--               or requeue
--   leases      zset L -> deadline (ms, server clock)
--   void:<L>    "reaped" or "cancelled": a late take with lease L does nothing
--   voids       zset L -> expiry (ms) of each void:<L> marker, so aq_delete removes
--               them too (expired entries go whenever one is added)
--   ev:data     zset "<need>:<wid>" -> deadline: dequeues waiting for data
--   ev:space    zset "<need>:<wid>" -> deadline: enqueues waiting for room
--   ev:held     zset wid -> deadline: enqueues on hold (pending; over shards, waiting
--               for their process's turn, not for room here: aq_put's hold)
--   ev:data:<wid>, ev:space:<wid>   one waiter's wake-up list (BLPOP), short TTL
--   ev:want:<wid>   how many elements a waiting enqueue still has to send (the share
--               of the room its wake-up gives it), expires with its registration
--   pending     zset wid -> deadline: enqueues in progress (they may finish after a
--               plain close; the queue is final once closed and this is empty)
--   producers   zset producer id -> deadline (heartbeat)
--   layout      a sharded queue's shards (JSON; see _queues/_shards.py): on its first
--               shard the shard count and every shard's name, on the others the
--               first shard's name; absent on a queue of one shard
-- Why payloads stay out of Lua: every Lua string is interned, and the Lua of the
-- server measured (Debian's Redis 7.0.15) hashes every byte of it, so a 28 KB payload
-- passed in ARGV or read with redis.call cost more server CPU than all the rest of
-- its element's handling; each such pass also copies it twice. Refs are short. Below
-- 1 KiB the key per element (its MSET, RENAME and DEL) costs more than Lua does, so
-- small payloads are entries themselves (the client decides, INLINE_MAX).
-- Invariants: size = LLEN items (FIFO) or HLEN slots (shuffle); every ref in items,
-- slots or a lease names an existing payload key, and every payload key is named by
-- exactly one of them (or is staged by the transaction whose aq_put admits or deletes
-- it); a take moves elements only when size - floor >= what it takes (floor =
-- mad while open, 0 once closed); every expired lease is put back by whichever call
-- comes next (reap); a waiter is registered in the same call that found it must wait,
-- so no wake-up is lost; wake-ups go oldest registration first, only to waiters that
-- can now progress, and woken enqueues split the room rather than all being told all
-- of it (they would send payloads that do not fit, which are then dropped).
-- Times: every deadline uses the server's TIME, so client clocks never matter.

local VOID_TTL = 600000

-- Lua's C stack caps unpack() at a few thousand values: call in chunks.
local function push_all(cmd, key, list, first, last)
  local i = first
  while i <= last do
    local j = math.min(last, i + 999)
    redis.call(cmd, key, unpack(list, i, j))
    i = j + 1
  end
end

local function load(keys, gen)
  local meta = keys[1]
  local m = redis.call('HMGET', meta, 'gen', 'kind', 'capacity', 'mad', 'closed', 'cancel')
  if m[1] ~= gen then return nil end
  return {meta = meta, P = prefix(meta), fifo = m[2] == 'fifo',
          cap = tonumber(m[3]), mad = tonumber(m[4]), closed = m[5] == '1',
          cancel = m[6] == '1'}
end

local function size(q)
  if q.fifo then return redis.call('LLEN', q.P .. 'items') end
  return redis.call('HLEN', q.P .. 'slots')
end

-- Payload keys of refs args[first..]: staged by the caller's transaction, not admitted.
local function drop_staged(P, args, first)
  local ks = {}
  for i = first, #args do
    if not inline(args[i]) then ks[#ks + 1] = P .. 'e:' .. args[i] end
  end
  del_all(ks)
end

-- Refs of the elements lease L holds (e:<L>.1 .. e:<L>.<count>).
local function lease_refs(L, count)
  local refs = {}
  for j = 1, count do refs[j] = L .. '.' .. j end
  return refs
end

local function lease_count(q, L)
  return tonumber(redis.call('GET', q.P .. 'lease:' .. L) or 0)
end

-- Add refs to the pool: at the head in their order (FIFO), or as new slots.
local function give_back(q, refs)
  if #refs == 0 then return end
  if q.fifo then
    local rev = {}
    for i = #refs, 1, -1 do rev[#rev + 1] = refs[i] end
    push_all('LPUSH', q.P .. 'items', rev, 1, #rev)
    return
  end
  local slots = q.P .. 'slots'
  local n = redis.call('HLEN', slots)
  local i = 1
  while i <= #refs do
    local j = math.min(#refs, i + 499)
    local fv = {}
    for x = i, j do
      fv[#fv + 1] = n + x - 1
      fv[#fv + 1] = refs[x]
    end
    redis.call('HSET', slots, unpack(fv))
    i = j + 1
  end
end

-- Put lease L's elements back (their payload keys keep their lease names).
local function restore_lease(q, L)
  give_back(q, lease_refs(L, lease_count(q, L)))
  redis.call('DEL', q.P .. 'lease:' .. L)
  redis.call('ZREM', q.P .. 'leases', L)
end

local function close(q, cancel)
  redis.call('HSET', q.meta, 'closed', '1')
  q.closed = true
  if cancel then
    redis.call('HSET', q.meta, 'cancel', '1')
    q.cancel = true
    redis.call('DEL', q.P .. 'pending', q.P .. 'ev:held')
  end
end

local function final(q)
  return q.closed and redis.call('EXISTS', q.P .. 'pending') == 0
end

-- Wake registered waiters that can progress now (all of them when `all`).
local function wake(q, data, all)
  local reg = q.P .. (data and 'ev:data' or 'ev:space')
  local ms = redis.call('ZRANGE', reg, 0, -1)
  if #ms == 0 then return end
  local avail
  if data then
    if final(q) then all = true end
    avail = size(q) - (q.closed and 0 or q.mad)
  else
    if q.cancel then all = true end
    avail = q.cap - size(q)
  end
  for _, m in ipairs(ms) do
    if not all and avail <= 0 then return end
    local sep = string.find(m, ':', 1, true)
    local need = tonumber(string.sub(m, 1, sep - 1))
    if all or need <= avail then
      local wid = string.sub(m, sep + 1)
      local key = reg .. ':' .. wid
      local give = math.max(avail, 0)
      if not data then
        -- an enqueue gets its share: what it still has to send, if that fits
        local want = q.P .. 'ev:want:' .. wid
        give = math.min(give, math.max(need, tonumber(redis.call('GET', want) or need)))
        redis.call('DEL', want)
        need = math.max(need, give)
      end
      redis.call('RPUSH', key, give)
      redis.call('PEXPIRE', key, WAKE_TTL)
      redis.call('ZREM', reg, m)
      avail = avail - need
    end
  end
end

local function wake_all(q)
  wake(q, true, true)
  wake(q, false, true)
end

-- Void lease L for VOID_TTL ms (see voids above).
local function set_void(q, L, why, now)
  redis.call('SET', q.P .. 'void:' .. L, why, 'PX', VOID_TTL)
  redis.call('ZREMRANGEBYSCORE', q.P .. 'voids', '-inf', now)
  redis.call('ZADD', q.P .. 'voids', now + VOID_TTL, L)
end

-- Return expired leases, drop expired registrations and producers (any call does it).
local function reap(q, now)
  local P = q.P
  local back = false
  for _, L in ipairs(redis.call('ZRANGE', P .. 'leases', '-inf', now, 'BYSCORE', 'LIMIT', 0, 64)) do
    restore_lease(q, L)
    set_void(q, L, 'reaped', now)
    back = true
  end
  redis.call('ZREMRANGEBYSCORE', P .. 'ev:data', '-inf', now)
  redis.call('ZREMRANGEBYSCORE', P .. 'ev:space', '-inf', now)
  redis.call('ZREMRANGEBYSCORE', P .. 'ev:held', '-inf', now)
  local gone = redis.call('ZREMRANGEBYSCORE', P .. 'pending', '-inf', now) > 0
  if redis.call('ZREMRANGEBYSCORE', P .. 'producers', '-inf', now) > 0
      and redis.call('EXISTS', P .. 'producers') == 0 and not q.closed then
    close(q, false)  -- the last producer's process died: drain, then OutOfRange
    wake_all(q)
  elseif back or gone then
    wake(q, true, false)
  end
end

local function begin(keys, args)
  local q = load(keys, args[1])
  if not q then return nil, nil end
  local now = now_ms()
  reap(q, now)
  return q, now
end

-- Move k elements of the pool into lease L as its elements from+1 .. from+k: their
-- payload keys are renamed to e:<L>.<j> (a small inline payload is written there). A
-- ref whose payload key is missing (deleted around aqueue) gets an empty payload,
-- which the consumer refuses (PayloadError).
local function move(q, L, from, k, args, ridx)
  if k <= 0 then return end
  local P = q.P
  local refs
  if q.fifo then
    local items = P .. 'items'
    refs = redis.call('LRANGE', items, 0, k - 1)
    redis.call('LTRIM', items, k, -1)
  else
    refs = {}
    local slots = P .. 'slots'
    local n = redis.call('HLEN', slots)
    for i = 1, k do
      -- uniform pick with the client's seeded random number, then swap-remove
      local idx = math.floor(tonumber(args[ridx + i - 1]) * n)
      if idx >= n then idx = n - 1 end
      n = n - 1
      local got = redis.call('HMGET', slots, idx, n)
      refs[i] = got[1]
      if idx ~= n then redis.call('HSET', slots, idx, got[2]) end
      redis.call('HDEL', slots, n)
    end
  end
  for i, ref in ipairs(refs) do
    local dst = P .. 'e:' .. L .. '.' .. (from + i)
    if inline(ref) then
      redis.call('SET', dst, ref)
    elseif redis.pcall('RENAME', P .. 'e:' .. ref, dst).err then
      redis.call('SET', dst, '')
    end
  end
  redis.call('SET', P .. 'lease:' .. L, from + k)
end

-- The take rule (the in-process queues' Engine.take_count, without their nowait
-- twins): how many more elements a take of mode `mode` gets now, or -1 (it cannot).
-- All it needs when they are there; a burst ('some') what is there; once the queue is
-- final, an 'upto' what is left if it gets anything at all.
local function take_count(mode, need, claimed, avail, is_final)
  if avail >= need then return need end
  if mode == 'some' and avail > 0 then return avail end
  if is_final and mode == 'upto' and claimed + math.max(avail, 0) > 0 then
    return math.max(avail, 0)
  end
  return -1
end

-- aq_take: ARGV gen L wid mode(one|many|upto|some) n lease_ms wait_ms progressive
-- rand...  ('some', a burst: 1..n as soon as one can be taken; it waits as needing 1)
-- -> {'ok', count} (the payloads are e:<L>.1 .. e:<L>.<count>) | {'wait', claimed} |
-- {'oor', size} | {'void'} | {'gone'}
local function aq_take(keys, args)
  local q, now = begin(keys, args)
  if not q then return {'gone'} end
  local P, L, wid, mode = q.P, args[2], args[3], args[4]
  local n, lease_ms, wait_ms = tonumber(args[5]), tonumber(args[6]), tonumber(args[7])
  local progressive = args[8] == '1'
  if redis.call('EXISTS', P .. 'void:' .. L) == 1 then return {'void'} end
  local claimed = lease_count(q, L)
  local need = n - claimed
  local avail = size(q) - (q.closed and 0 or q.mad)
  local member = ((progressive or mode == 'some') and 1 or n) .. ':' .. wid
  local is_final = final(q)
  local take = take_count(mode, need, claimed, avail, is_final)
  if take >= 0 then
    move(q, L, claimed, take, args, 9 + claimed)
    redis.call('ZADD', P .. 'leases', now + lease_ms, L)
    redis.call('ZREM', P .. 'ev:data', member)
    wake(q, false, false)
    wake(q, true, false)
    return {'ok', claimed + take}
  end
  if is_final then
    if claimed > 0 then restore_lease(q, L) end
    redis.call('ZREM', P .. 'ev:data', member)
    return {'oor', size(q)}
  end
  if progressive and avail > 0 then
    move(q, L, claimed, avail, args, 9 + claimed)
    claimed = claimed + avail
    wake(q, false, false)
  end
  if claimed > 0 then redis.call('ZADD', P .. 'leases', now + lease_ms, L) end
  redis.call('ZADD', P .. 'ev:data', now + wait_ms, member)
  return {'wait', claimed}
end

-- aq_ack: ARGV gen L -> number of elements acknowledged (their payload keys are
-- deleted), or -1 (the lease expired and its elements went back: the caller must not
-- use them), or -2 (the queue is gone)
local function aq_ack(keys, args)
  local q = load(keys, args[1])
  if not q then return -2 end
  local L = args[2]
  local n = lease_count(q, L)
  if n == 0 then return -1 end
  local ks = {q.P .. 'lease:' .. L}
  for j = 1, n do ks[j + 1] = q.P .. 'e:' .. L .. '.' .. j end
  del_all(ks)
  redis.call('ZREM', q.P .. 'leases', L)
  redis.call('HINCRBY', q.meta, 'deq', n)
  return n
end

-- The put rule (the in-process queues' Engine.put_count, without their early admission
-- of an atomic batch a waiting dequeue will make room for: no reservation spans
-- processes): how many of k elements an enqueue admits now, with `free` room.
local function put_count(k, free, atomic)
  if free >= k then return k end
  if atomic then return 0 end
  return math.max(free, 0)
end

-- An enqueue ends or leaves: it is no longer pending, waiting for room or on hold.
local function forget_put(P, wid, member)
  redis.call('ZREM', P .. 'pending', wid)
  redis.call('ZREM', P .. 'ev:space', member)
  redis.call('ZREM', P .. 'ev:held', wid)
end

-- aq_put: ARGV gen wid atomic total wait_ms entry...  Each entry is a ref, whose
-- payload e:<ref> the caller's MSET wrote in the same transaction (deleted if not
-- admitted), or a small payload itself.
-- (total counts the refs sent and the elements the caller still holds)
-- atomic '2' ("hold"): all or nothing, and when not admitted the caller stays pending
-- without waiting for room here (ev:held: it waits in its process's line for a turn;
-- a close still lets it finish); its registration for room goes, and the room it was
-- told of passes on.
-- -> {'ok', admitted, free} | {'closed', cancel} | {'gone'}
local function aq_put(keys, args)
  local q, now = begin(keys, args)
  if not q then
    drop_staged(prefix(keys[1]), args, 6)
    return {'gone'}
  end
  local P, wid, atomic, hold = q.P, args[2], args[3] ~= '0', args[3] == '2'
  local total, wait_ms = tonumber(args[4]), tonumber(args[5])
  local k = #args - 5
  local member = (atomic and total or 1) .. ':' .. wid
  if q.closed and (q.cancel or not redis.call('ZSCORE', P .. 'pending', wid)) then
    forget_put(P, wid, member)
    drop_staged(P, args, 6)
    return {'closed', q.cancel and 1 or 0}
  end
  local n = size(q)
  local admit = put_count(k, q.cap - n, atomic)
  if admit > 0 then
    if q.fifo then
      push_all('RPUSH', P .. 'items', args, 6, 5 + admit)
    else
      give_back(q, {unpack(args, 6, 5 + admit)})
    end
    n = n + admit
    redis.call('HINCRBY', q.meta, 'enq', admit)
    if n > tonumber(redis.call('HGET', q.meta, 'peak')) then redis.call('HSET', q.meta, 'peak', n) end
  end
  drop_staged(P, args, 6 + admit)
  if total - admit > 0 then
    redis.call('ZADD', P .. 'pending', now + wait_ms, wid)
    if hold then
      redis.call('ZREM', P .. 'ev:space', member)
      redis.call('ZADD', P .. 'ev:held', now + wait_ms, wid)
      redis.call('DEL', P .. 'ev:want:' .. wid)
      wake(q, false, false)  -- (room it was told of passes on to the next waiter)
    elseif admit < k or k == 0 then
      redis.call('ZADD', P .. 'ev:space', now + wait_ms, member)
      redis.call('ZREM', P .. 'ev:held', wid)
      redis.call('SET', P .. 'ev:want:' .. wid, total - admit, 'PX', wait_ms)
    end
  else
    forget_put(P, wid, member)
  end
  if admit > 0 or (q.closed and total - admit <= 0) then wake(q, true, false) end
  return {'ok', admit, q.cap - n}
end

-- aq_leave: ARGV gen L unknown wid get_member put_member payload...
-- A caller leaves early (cancelled, timed out, failed): deregister it, put back what
-- lease L holds, or the payloads it had been handed (the ack ran: they come back in
-- ARGV, the one path where payloads pass through Lua, rare, and allowed when the
-- server is out of memory), or, when the take's outcome is unknown, void L so the
-- take does nothing if it runs later. Then pass the wake-ups on.
-- -> 0 (nothing to undo) | 1 (lease put back) | 2 (it had expired and gone back)
-- | 3 (payloads put back) | 4 (voided)
local function aq_leave(keys, args)
  local q = load(keys, args[1])
  if not q then return 0 end
  local P, L, wid = q.P, args[2], args[4]
  redis.call('ZREM', P .. 'ev:data', args[5])
  forget_put(P, wid, args[6])
  redis.call('DEL', P .. 'ev:data:' .. wid, P .. 'ev:space:' .. wid, P .. 'ev:want:' .. wid)
  local status = 0
  if L ~= '' then
    if redis.call('EXISTS', P .. 'lease:' .. L) == 1 then
      restore_lease(q, L)
      status = 1
    elseif redis.call('GET', P .. 'void:' .. L) == 'reaped' then
      status = 2
    elseif #args > 6 then
      local refs = {}
      for i = 7, #args do
        refs[#refs + 1] = L .. '.b' .. (i - 6)
        redis.call('SET', P .. 'e:' .. refs[#refs], args[i])
      end
      give_back(q, refs)
      redis.call('HINCRBY', q.meta, 'deq', -#refs)
      status = 3
    elseif args[3] == '1' then
      set_void(q, L, 'cancelled', now_ms())
      status = 4
    end
  end
  wake(q, true, false)
  wake(q, false, false)
  return status
end

-- aq_close: ARGV gen cancel
local function aq_close(keys, args)
  local q = begin(keys, args)
  if not q then return 0 end
  close(q, args[2] == '1')
  wake_all(q)
  return 1
end

-- aq_producer: ARGV gen op(add|beat|done) ttl_ms clean id...
local function aq_producer(keys, args)
  local q, now = begin(keys, args)
  if not q then return {'gone'} end
  local reply, removed, last = producers_op(q.P, q.closed, now, args)
  if reply then return reply end
  if args[4] ~= '1' then
    close(q, true)
    wake_all(q)
  elseif last and not q.closed then
    close(q, false)
    wake_all(q)
  end
  return {'ok', removed}
end

-- aq_open: ARGV gen kind capacity mad dtypes shapes names format [layout]
-- (layout: the JSON of a sharded queue's shards, stored in P..'layout' where MGET
-- reads it; none for a queue of one shard, whose keys stay exactly those above)
-- -> {'created', gen} | {'exists', gen, kind, capacity, mad, dtypes, shapes, names,
-- format, layout}
local function aq_open(keys, args)
  local meta = keys[1]
  local layout = prefix(meta) .. 'layout'
  if redis.call('EXISTS', meta) == 1 then
    local m = redis.call('HMGET', meta, 'gen', 'kind', 'capacity', 'mad', 'dtypes',
                         'shapes', 'names', 'format')
    table.insert(m, 1, 'exists')
    m[#m + 1] = redis.call('GET', layout)
    return m
  end
  redis.call('HSET', meta, 'gen', args[1], 'kind', args[2], 'capacity', args[3],
             'mad', args[4], 'dtypes', args[5], 'shapes', args[6], 'names', args[7],
             'format', args[8], 'closed', '0', 'cancel', '0', 'enq', 0, 'deq', 0,
             'peak', 0)
  if args[9] and args[9] ~= '' then redis.call('SET', layout, args[9]) end
  return {'created', args[1]}
end

-- aq_stats (read-only): ARGV gen -> {size, closed, cancel, enq, deq, peak,
-- waiting enqueues, waiting dequeues, producers, leases, enqueues on hold} or {} when
-- gone
local function aq_stats(keys, args)
  local q = load(keys, args[1])
  if not q then return {} end
  local P, now = q.P, now_ms()
  local m = redis.call('HMGET', q.meta, 'enq', 'deq', 'peak')
  local closed, live = closed_now(P, q.closed, now)
  return {size(q), closed and 1 or 0, q.cancel and 1 or 0, tonumber(m[1]), tonumber(m[2]),
          tonumber(m[3]), redis.call('ZCOUNT', P .. 'ev:space', now, '+inf'),
          redis.call('ZCOUNT', P .. 'ev:data', now, '+inf'), live,
          redis.call('ZCARD', P .. 'leases'), redis.call('ZCOUNT', P .. 'ev:held', now, '+inf')}
end

-- aq_delete: wake every waiter (they then find the queue gone), drop every key, the
-- payload keys of the stored and the leased elements included. -> 1 | 0 (no such queue)
-- | -1 (the name holds a replay table)
local function aq_delete(keys, args)
  local meta = keys[1]
  if redis.call('EXISTS', meta) == 0 then return 0 end
  local kind = redis.call('HGET', meta, 'kind')
  if kind == 'table' or kind == 'traj' then return -1 end  -- (rt_drop's)
  local P = prefix(meta)
  for _, reg in ipairs({'ev:data', 'ev:space'}) do
    for _, m in ipairs(redis.call('ZRANGE', P .. reg, 0, -1)) do
      local key = P .. reg .. ':' .. string.sub(m, string.find(m, ':', 1, true) + 1)
      redis.call('RPUSH', key, 0)
      redis.call('PEXPIRE', key, WAKE_TTL)
    end
  end
  local refs
  if redis.call('HGET', meta, 'kind') == 'fifo' then
    refs = redis.call('LRANGE', P .. 'items', 0, -1)
  else
    refs = redis.call('HVALS', P .. 'slots')
  end
  for _, L in ipairs(redis.call('ZRANGE', P .. 'leases', 0, -1)) do
    local lease = P .. 'lease:' .. L
    for j = 1, tonumber(redis.call('GET', lease) or 0) do refs[#refs + 1] = L .. '.' .. j end
    redis.call('DEL', lease)
  end
  local ks = {}
  for _, ref in ipairs(refs) do
    if not inline(ref) then ks[#ks + 1] = P .. 'e:' .. ref end
  end
  for _, L in ipairs(redis.call('ZRANGE', P .. 'voids', 0, -1)) do ks[#ks + 1] = P .. 'void:' .. L end
  del_all(ks)
  redis.call('DEL', meta, P .. 'items', P .. 'slots', P .. 'leases', P .. 'ev:data',
             P .. 'ev:space', P .. 'ev:held', P .. 'pending', P .. 'producers', P .. 'voids',
             P .. 'layout')
  return 1
end

redis.register_function{function_name = 'aq_stats', callback = aq_stats, flags = {'no-writes'}}
-- Opening reads the stored settings (a reopen must work on a full server); creating
-- writes one small hash.
redis.register_function{function_name = 'aq_open', callback = aq_open, flags = {'allow-oom'}}
redis.register_function('aq_put', aq_put)
-- Calls that free memory or give elements back must work when the server is full.
redis.register_function{function_name = 'aq_take', callback = aq_take, flags = {'allow-oom'}}
redis.register_function{function_name = 'aq_ack', callback = aq_ack, flags = {'allow-oom'}}
redis.register_function{function_name = 'aq_leave', callback = aq_leave, flags = {'allow-oom'}}
redis.register_function{function_name = 'aq_close', callback = aq_close, flags = {'allow-oom'}}
redis.register_function{function_name = 'aq_producer', callback = aq_producer, flags = {'allow-oom'}}
redis.register_function{function_name = 'aq_delete', callback = aq_delete, flags = {'allow-oom'}}
