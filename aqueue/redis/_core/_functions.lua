#!lua name=aqueue
-- aqueue's function library on the server, its first part: what every product's part
-- uses (aqueue/redis/_core/_library.py loads this, then aqueue/redis/_queues/_functions.lua,
-- then aqueue/redis/_replay/_functions.lua, as one library, one FUNCTION LOAD; a new
-- product appends its part to that list). Its helpers are locals of the one chunk the
-- parts make, so the later parts call them by name:
--   now_ms     the server's clock in ms (every deadline uses it: client clocks never
--              matter)
--   del_all    DEL of a list of keys in chunks (Lua's C stack caps unpack())
--   prefix     P = "aq:{name}:" from KEYS[1] = P.."meta": every key of one queue or
--              table shares P, hash tag included, so a function's keys are in one slot
--   inline     whether an entry is a small payload itself (AQ1 starts with "AQ") or the
--              ref of a payload key
--   producers_op, closed_now   the producer registry (zset P..'producers': id ->
--              deadline) of a queue or a table, and whether it has closed by expiry
--   WAKE_TTL   the expiry of a waiter's wake-up list
-- and the version function aq_version (the library's version: a hash of its source).

local VERSION = '@VERSION@'
local WAKE_TTL = 30000

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function del_all(keys)
  local i = 1
  while i <= #keys do
    local j = math.min(#keys, i + 999)
    redis.call('DEL', unpack(keys, i, j))
    i = j + 1
  end
end

local function prefix(meta) return string.sub(meta, 1, #meta - 4) end

-- An entry of items/slots is a ref, or a small payload itself (AQ1 starts with "AQ";
-- refs are hex).
local function inline(entry) return string.sub(entry, 1, 2) == 'AQ' end

-- The producer registry of a queue or a replay table (zset P..'producers': id ->
-- deadline, refreshed by the heartbeat), for ARGV gen op(add|beat|done) ttl_ms clean
-- id...: the reply of an 'add' or a 'beat'; for a 'done', nil, then whether the id was
-- registered (1 or 0) and whether it was the last one (the caller closes).
local function producers_op(P, closed, now, args)
  local key, op, ttl = P .. 'producers', args[2], tonumber(args[3])
  if op == 'add' then
    if closed then return {'closed'} end
    redis.call('ZADD', key, now + ttl, args[5])
    return {'ok', 1}
  elseif op == 'beat' then
    local n = 0
    for i = 5, #args do n = n + redis.call('ZADD', key, 'XX', 'CH', now + ttl, args[i]) end
    return {'ok', n}
  end
  local removed = redis.call('ZREM', key, args[5])
  return nil, removed, removed == 1 and redis.call('EXISTS', key) == 0
end

-- Whether a queue or table (prefix P) is closed as its next call will find it: closed
-- already, or every registered producer's registration expired (its process died),
-- which the next writing call turns into a close (reap); read-only callers say so now.
-- -> closed (bool), live producers
local function closed_now(P, closed, now)
  local live = redis.call('ZCOUNT', P .. 'producers', now, '+inf')
  return closed or (live == 0 and redis.call('EXISTS', P .. 'producers') == 1), live
end

redis.register_function{function_name = 'aq_version', callback = function() return VERSION end,
                        flags = {'no-writes'}}
