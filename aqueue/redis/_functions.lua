#!lua name=aqueue
-- aqueue's server-side queue logic: every state change of a queue is one of these
-- functions, so it is atomic. Loaded by _library.py with FUNCTION LOAD (REPLACE when
-- aq_version differs from the client's). Keys (P = "aq:{name}:", KEYS[1] = P.."meta"):
--   meta        hash: gen kind capacity mad dtypes shapes names format closed cancel
--               enq deq peak nextid
--   items       FIFO: list of payloads. Shuffle: hash id -> payload (leased ones too)
--   slots       shuffle only: hash 0..size-1 -> id, the pool a take picks from
--   lease:<L>   list of taken payloads (FIFO) or ids (shuffle), until ack or requeue
--   leases      zset L -> deadline (ms, server clock)
--   void:<L>    "reaped" or "cancelled": a late take with lease L does nothing
--   ev:data     zset "<need>:<wid>" -> deadline: dequeues waiting for data
--   ev:space    zset "<need>:<wid>" -> deadline: enqueues waiting for room
--   ev:data:<wid>, ev:space:<wid>   one waiter's wake-up list (BLPOP), short TTL
--   pending     zset wid -> deadline: enqueues in progress (they may finish after a
--               plain close; the queue is final once closed and this is empty)
--   producers   zset producer id -> deadline (heartbeat)
-- Invariants: size = LLEN items (FIFO) or HLEN slots (shuffle); a take moves elements
-- only when size - floor >= what it takes (floor = mad while open, 0 once closed);
-- every expired lease is put back by whichever call comes next (reap); a waiter is
-- registered in the same call that found it must wait, so no wake-up is lost; wake-ups
-- go oldest registration first, only to waiters that can now progress.
-- Times: every deadline uses the server's TIME, so client clocks never matter.

local VERSION = '@VERSION@'
local VOID_TTL = 600000
local WAKE_TTL = 30000

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Lua's C stack caps unpack() at a few thousand values: push in chunks.
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
  return {meta = meta, P = string.sub(meta, 1, #meta - 4), fifo = m[2] == 'fifo',
          cap = tonumber(m[3]), mad = tonumber(m[4]), closed = m[5] == '1',
          cancel = m[6] == '1'}
end

local function size(q)
  if q.fifo then return redis.call('LLEN', q.P .. 'items') end
  return redis.call('HLEN', q.P .. 'slots')
end

-- Put lease L's elements back: at the head in their order (FIFO), or into the pool.
local function restore_lease(q, L)
  local lease = q.P .. 'lease:' .. L
  if q.fifo then
    for _ = 1, redis.call('LLEN', lease) do
      redis.call('LMOVE', lease, q.P .. 'items', 'RIGHT', 'LEFT')
    end
  else
    local ids = redis.call('LRANGE', lease, 0, -1)
    local slots = q.P .. 'slots'
    local n = redis.call('HLEN', slots)
    for i, id in ipairs(ids) do redis.call('HSET', slots, n + i - 1, id) end
  end
  redis.call('DEL', lease)
  redis.call('ZREM', q.P .. 'leases', L)
end

-- Put payloads (handed over, acked, then given back by a cancelled caller) back.
local function restore_payloads(q, args, first, last)
  if last < first then return end
  if q.fifo then
    local rev = {}
    for i = last, first, -1 do rev[#rev + 1] = args[i] end
    push_all('LPUSH', q.P .. 'items', rev, 1, #rev)
  else
    local k = last - first + 1
    local id0 = redis.call('HINCRBY', q.meta, 'nextid', k) - k
    local slots, items = q.P .. 'slots', q.P .. 'items'
    local n = redis.call('HLEN', slots)
    for i = 0, k - 1 do
      redis.call('HSET', items, id0 + i, args[first + i])
      redis.call('HSET', slots, n + i, id0 + i)
    end
  end
  redis.call('HINCRBY', q.meta, 'deq', first - last - 1)
end

local function close(q, cancel)
  redis.call('HSET', q.meta, 'closed', '1')
  q.closed = true
  if cancel then
    redis.call('HSET', q.meta, 'cancel', '1')
    q.cancel = true
    redis.call('DEL', q.P .. 'pending')
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
      local key = reg .. ':' .. string.sub(m, sep + 1)
      redis.call('RPUSH', key, math.max(avail, 0))
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

-- Return expired leases, drop expired registrations and producers (any call does it).
local function reap(q, now)
  local P = q.P
  local back = false
  for _, L in ipairs(redis.call('ZRANGE', P .. 'leases', '-inf', now, 'BYSCORE', 'LIMIT', 0, 64)) do
    restore_lease(q, L)
    redis.call('SET', P .. 'void:' .. L, 'reaped', 'PX', VOID_TTL)
    back = true
  end
  redis.call('ZREMRANGEBYSCORE', P .. 'ev:data', '-inf', now)
  redis.call('ZREMRANGEBYSCORE', P .. 'ev:space', '-inf', now)
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

-- Move k elements of the pool into lease L; return their payloads.
local function move(q, lease, k, args, ridx)
  local out = {}
  if q.fifo then
    local items = q.P .. 'items'
    for i = 1, k do out[i] = redis.call('LMOVE', items, lease, 'LEFT', 'RIGHT') end
    return out
  end
  local slots, items = q.P .. 'slots', q.P .. 'items'
  local n = redis.call('HLEN', slots)
  for i = 1, k do
    -- uniform pick with the client's seeded random number, then swap-remove
    local idx = math.floor(tonumber(args[ridx + i - 1]) * n)
    if idx >= n then idx = n - 1 end
    local id = redis.call('HGET', slots, idx)
    n = n - 1
    if idx ~= n then redis.call('HSET', slots, idx, redis.call('HGET', slots, n)) end
    redis.call('HDEL', slots, n)
    redis.call('RPUSH', lease, id)
    out[i] = redis.call('HGET', items, id)
  end
  return out
end

local function lease_payloads(q, lease)
  local vals = redis.call('LRANGE', lease, 0, -1)
  if q.fifo then return vals end
  local items = q.P .. 'items'
  for i, id in ipairs(vals) do vals[i] = redis.call('HGET', items, id) end
  return vals
end

-- aq_take: ARGV gen L wid mode(one|many|upto) n lease_ms wait_ms progressive rand...
-- -> {'ok', payload...} | {'wait', claimed} | {'oor', size} | {'void'} | {'gone'}
local function aq_take(keys, args)
  local q, now = begin(keys, args)
  if not q then return {'gone'} end
  local P, L, wid, mode = q.P, args[2], args[3], args[4]
  local n, lease_ms, wait_ms = tonumber(args[5]), tonumber(args[6]), tonumber(args[7])
  local progressive = args[8] == '1'
  if redis.call('EXISTS', P .. 'void:' .. L) == 1 then return {'void'} end
  local lease = P .. 'lease:' .. L
  local claimed = redis.call('LLEN', lease)
  local need = n - claimed
  local avail = size(q) - (q.closed and 0 or q.mad)
  local member = (progressive and 1 or n) .. ':' .. wid
  local is_final = final(q)
  local take = -1
  if avail >= need then
    take = need
  elseif is_final and mode == 'upto' and claimed + math.max(avail, 0) > 0 then
    take = math.max(avail, 0)
  end
  if take >= 0 then
    local out = move(q, lease, take, args, 9 + claimed)
    if claimed > 0 then out = lease_payloads(q, lease) end
    redis.call('ZADD', P .. 'leases', now + lease_ms, L)
    redis.call('ZREM', P .. 'ev:data', member)
    wake(q, false, false)
    wake(q, true, false)
    table.insert(out, 1, 'ok')
    return out
  end
  if is_final then
    if claimed > 0 then restore_lease(q, L) end
    redis.call('ZREM', P .. 'ev:data', member)
    return {'oor', size(q)}
  end
  if progressive and avail > 0 then
    move(q, lease, avail, args, 9 + claimed)
    claimed = claimed + avail
    wake(q, false, false)
  end
  if claimed > 0 then redis.call('ZADD', P .. 'leases', now + lease_ms, L) end
  redis.call('ZADD', P .. 'ev:data', now + wait_ms, member)
  return {'wait', claimed}
end

-- aq_ack: ARGV gen L -> number of elements acknowledged, or -1 (the lease expired
-- and its elements went back: the caller must not use them)
local function aq_ack(keys, args)
  local q = load(keys, args[1])
  if not q then return -2 end
  local lease = q.P .. 'lease:' .. args[2]
  local n = redis.call('LLEN', lease)
  if n == 0 then return -1 end
  if not q.fifo then
    local ids = redis.call('LRANGE', lease, 0, -1)
    push_all('HDEL', q.P .. 'items', ids, 1, #ids)
  end
  redis.call('DEL', lease)
  redis.call('ZREM', q.P .. 'leases', args[2])
  redis.call('HINCRBY', q.meta, 'deq', n)
  return n
end

-- aq_put: ARGV gen wid atomic total wait_ms payload...  (total counts the payloads
-- sent and those the caller still holds) -> {'ok', admitted, free} | {'closed', cancel}
local function aq_put(keys, args)
  local q, now = begin(keys, args)
  if not q then return {'gone'} end
  local P, wid, atomic = q.P, args[2], args[3] == '1'
  local total, wait_ms = tonumber(args[4]), tonumber(args[5])
  local k = #args - 5
  local member = (atomic and total or 1) .. ':' .. wid
  if q.closed and (q.cancel or not redis.call('ZSCORE', P .. 'pending', wid)) then
    redis.call('ZREM', P .. 'pending', wid)
    redis.call('ZREM', P .. 'ev:space', member)
    return {'closed', q.cancel and 1 or 0}
  end
  local n = size(q)
  local free = q.cap - n
  local admit = 0
  if atomic then
    if free >= k then admit = k end
  else
    admit = math.max(0, math.min(free, k))
  end
  if admit > 0 then
    if q.fifo then
      push_all('RPUSH', P .. 'items', args, 6, 5 + admit)
    else
      local id0 = redis.call('HINCRBY', q.meta, 'nextid', admit) - admit
      local items, slots = P .. 'items', P .. 'slots'
      for i = 0, admit - 1 do
        redis.call('HSET', items, id0 + i, args[6 + i])
        redis.call('HSET', slots, n + i, id0 + i)
      end
    end
    n = n + admit
    redis.call('HINCRBY', q.meta, 'enq', admit)
    if n > tonumber(redis.call('HGET', q.meta, 'peak')) then redis.call('HSET', q.meta, 'peak', n) end
  end
  if total - admit > 0 then
    redis.call('ZADD', P .. 'pending', now + wait_ms, wid)
    if admit < k or k == 0 then
      redis.call('ZADD', P .. 'ev:space', now + wait_ms, member)
    end
  else
    redis.call('ZREM', P .. 'pending', wid)
    redis.call('ZREM', P .. 'ev:space', member)
  end
  if admit > 0 or (q.closed and total - admit <= 0) then wake(q, true, false) end
  return {'ok', admit, q.cap - n}
end

-- aq_leave: ARGV gen L unknown wid get_member put_member payload...
-- A caller leaves early (cancelled, timed out, failed): deregister it, put back what
-- lease L holds, or the payloads it had been handed (the ack ran), or, when the take's
-- outcome is unknown, void L so the take does nothing if it runs later. Then pass the
-- wake-ups on.
local function aq_leave(keys, args)
  local q = load(keys, args[1])
  if not q then return 0 end
  local P, L, wid = q.P, args[2], args[4]
  redis.call('ZREM', P .. 'ev:data', args[5])
  redis.call('ZREM', P .. 'ev:space', args[6])
  redis.call('ZREM', P .. 'pending', wid)
  redis.call('DEL', P .. 'ev:data:' .. wid, P .. 'ev:space:' .. wid)
  local status = 0
  if L ~= '' then
    if redis.call('EXISTS', P .. 'lease:' .. L) == 1 then
      restore_lease(q, L)
      status = 1
    elseif redis.call('GET', P .. 'void:' .. L) == 'reaped' then
      status = 2
    elseif #args > 6 then
      restore_payloads(q, args, 7, #args)
      status = 3
    elseif args[3] == '1' then
      redis.call('SET', P .. 'void:' .. L, 'cancelled', 'PX', VOID_TTL)
      status = 4
    end
  end
  wake(q, true, false)
  wake(q, false, false)
  return status
end

-- aq_close: ARGV gen cancel
local function aq_close(keys, args)
  local q, now = begin(keys, args)
  if not q then return 0 end
  close(q, args[2] == '1')
  wake_all(q)
  return 1
end

-- aq_producer: ARGV gen op(add|beat|done) ttl_ms clean id...
local function aq_producer(keys, args)
  local q, now = begin(keys, args)
  if not q then return {'gone'} end
  local key, op, ttl = q.P .. 'producers', args[2], tonumber(args[3])
  if op == 'add' then
    if q.closed then return {'closed'} end
    redis.call('ZADD', key, now + ttl, args[5])
    return {'ok', 1}
  elseif op == 'beat' then
    local n = 0
    for i = 5, #args do n = n + redis.call('ZADD', key, 'XX', 'CH', now + ttl, args[i]) end
    return {'ok', n}
  end
  local removed = redis.call('ZREM', key, args[5])
  if args[4] ~= '1' then
    close(q, true)
    wake_all(q)
  elseif removed == 1 and redis.call('EXISTS', key) == 0 and not q.closed then
    close(q, false)
    wake_all(q)
  end
  return {'ok', removed}
end

-- aq_open: ARGV gen kind capacity mad dtypes shapes names format
-- -> {'created', gen} | {'exists', gen, kind, capacity, mad, dtypes, shapes, names, format}
local function aq_open(keys, args)
  local meta = keys[1]
  if redis.call('EXISTS', meta) == 1 then
    local m = redis.call('HMGET', meta, 'gen', 'kind', 'capacity', 'mad', 'dtypes',
                         'shapes', 'names', 'format')
    table.insert(m, 1, 'exists')
    return m
  end
  redis.call('HSET', meta, 'gen', args[1], 'kind', args[2], 'capacity', args[3],
             'mad', args[4], 'dtypes', args[5], 'shapes', args[6], 'names', args[7],
             'format', args[8], 'closed', '0', 'cancel', '0', 'enq', 0, 'deq', 0,
             'peak', 0, 'nextid', 0)
  return {'created', args[1]}
end

-- aq_stats (read-only): ARGV gen -> {size, closed, cancel, enq, deq, peak,
-- waiting enqueues, waiting dequeues, producers, leases} or {} when gone
local function aq_stats(keys, args)
  local q = load(keys, args[1])
  if not q then return {} end
  local P, now = q.P, now_ms()
  local m = redis.call('HMGET', q.meta, 'enq', 'deq', 'peak')
  return {size(q), q.closed and 1 or 0, q.cancel and 1 or 0, tonumber(m[1]), tonumber(m[2]),
          tonumber(m[3]), redis.call('ZCOUNT', P .. 'ev:space', now, '+inf'),
          redis.call('ZCOUNT', P .. 'ev:data', now, '+inf'),
          redis.call('ZCOUNT', P .. 'producers', now, '+inf'), redis.call('ZCARD', P .. 'leases')}
end

-- aq_delete: wake every waiter (they then find the queue gone), drop every key.
local function aq_delete(keys, args)
  local meta = keys[1]
  if redis.call('EXISTS', meta) == 0 then return 0 end
  local P = string.sub(meta, 1, #meta - 4)
  for _, reg in ipairs({'ev:data', 'ev:space'}) do
    for _, m in ipairs(redis.call('ZRANGE', P .. reg, 0, -1)) do
      local key = P .. reg .. ':' .. string.sub(m, string.find(m, ':', 1, true) + 1)
      redis.call('RPUSH', key, 0)
      redis.call('PEXPIRE', key, WAKE_TTL)
    end
  end
  for _, L in ipairs(redis.call('ZRANGE', P .. 'leases', 0, -1)) do
    redis.call('DEL', P .. 'lease:' .. L)
  end
  redis.call('DEL', meta, P .. 'items', P .. 'slots', P .. 'leases', P .. 'ev:data',
             P .. 'ev:space', P .. 'pending', P .. 'producers')
  return 1
end

redis.register_function{function_name = 'aq_version', callback = function() return VERSION end,
                        flags = {'no-writes'}}
redis.register_function{function_name = 'aq_stats', callback = aq_stats, flags = {'no-writes'}}
redis.register_function('aq_open', aq_open)
redis.register_function('aq_put', aq_put)
-- Calls that free memory or give elements back must work when the server is full.
redis.register_function{function_name = 'aq_take', callback = aq_take, flags = {'allow-oom'}}
redis.register_function{function_name = 'aq_ack', callback = aq_ack, flags = {'allow-oom'}}
redis.register_function{function_name = 'aq_leave', callback = aq_leave, flags = {'allow-oom'}}
redis.register_function{function_name = 'aq_close', callback = aq_close, flags = {'allow-oom'}}
redis.register_function{function_name = 'aq_producer', callback = aq_producer, flags = {'allow-oom'}}
redis.register_function{function_name = 'aq_delete', callback = aq_delete, flags = {'allow-oom'}}
