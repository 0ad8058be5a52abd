-- aqueue's trajectory tables on the server: the fourth part of the `aqueue` function
-- library, after the replay tables' part, whose locals it calls (rt_begin, rt_save,
-- rt_add, rt_remove, rt_sample, rt_stats, can_insert, reg_add, reg_del, notify, ...).
-- A trajectory table is a replay table of kind 'traj' (rt_open stores its TT_SETTINGS)
-- whose items are windows of steps, as aqueue/_replay/_trajectory/_steps.py describes:
-- the replay engine (limiter, selectors, priorities, times sampled, waiters, producers,
-- closing) runs unchanged; this part keeps the steps, stored once, and fills the hooks
-- through which the engine tells it that items left (RT_HOOKS). Keys (P as the table's):
--   meta     the replay table's, plus max_steps length stride and the counters
--            next_id next_writer writers appended stored sevicted sfreed wdropped
--   s:<id>   one step's fields (AQ1), staged at st:<ref> by the append's MULTI and
--            renamed here; deleted when nothing needs the step any more
--   held     zset id -> id: the steps held (the oldest is evicted first)
--   ref      hash id -> the held items containing it + 1 if its writer pins it
--   own      hash id -> its writer, while a pending window of that writer contains it
--   first    hash id -> the key of the held item whose window starts there
--   wr       hash writer id -> "pos;start;pend": pos and start as Episode's
--            (_episodes.py), pend the ids of positions start .. pos - 1 (-1: none)
--   pl[key]  an item's payload is its row, TT_ROW .. ids: a small inline entry (the
--            stored kind 'traj' keeps replay table clients from reading it)
-- Invariants: those of _steps.py; a step's id is never reused; ref[id] reaches 0 exactly
-- when the step is freed or evicted; every change is one function call.

local TT_ROW = 'AQrow:'

local function tt_ids(s)
  local out = {}
  for x in string.gmatch(s, '[^,]+') do out[#out + 1] = tonumber(x) end
  return out
end

local function tt_join(ids)
  local parts = {}
  for i, id in ipairs(ids) do parts[i] = istr(id) end
  return table.concat(parts, ',')
end

local function tt_row(entry) return tt_ids(string.sub(entry, #TT_ROW + 1)) end

-- The steps' settings and counters (t.c), and a cache of the writers touched (t.wc).
local function tt_load(t)
  local m = redis.call('HMGET', t.meta, 'max_steps', 'length', 'stride', unpack(TT_COUNTERS))
  t.max_steps, t.length, t.stride = tonumber(m[1]), tonumber(m[2]), tonumber(m[3])
  t.c, t.wc = {}, {}
  for i, f in ipairs(TT_COUNTERS) do t.c[f] = tonumber(m[3 + i]) end
end

-- (rt_save calls it: a writer set to false was closed)
RT_HOOKS.save = function(t)
  local fv = {}
  for _, f in ipairs(TT_COUNTERS) do
    fv[#fv + 1] = f
    fv[#fv + 1] = istr(t.c[f])
  end
  redis.call('HSET', t.meta, unpack(fv))
  for wid, w in pairs(t.wc) do
    if w then
      redis.call('HSET', t.P .. 'wr', wid,
        istr(w.pos) .. ';' .. istr(w.start) .. ';' .. tt_join(w.pend))
    else
      redis.call('HDEL', t.P .. 'wr', wid)
    end
  end
end

local function tt_writer(t, wid)
  local w = t.wc[wid]
  if w ~= nil then return w or nil end
  local s = redis.call('HGET', t.P .. 'wr', wid)
  if not s then return nil end
  local pos, start, pend = string.match(s, '^(%d+);(%d+);(.*)$')
  w = {pos = tonumber(pos), start = tonumber(start), pend = tt_ids(pend)}
  t.wc[wid] = w
  return w
end

-- Take one reference off each of ids (-1: no step); add those now unneeded to `zero`.
local function tt_unref(t, ids, zero)
  for _, id in ipairs(ids) do
    if id >= 0 and redis.call('HINCRBY', t.P .. 'ref', istr(id), -1) == 0 then
      zero[#zero + 1] = id
    end
  end
  return zero
end

local function tt_unpin(t, ids, zero)
  for _, id in ipairs(ids) do
    if id >= 0 then redis.call('HDEL', t.P .. 'own', istr(id)) end
  end
  return tt_unref(t, ids, zero)
end

-- Release steps nothing needs; during a sample (t.defer) their payloads are deleted
-- after the sample has copied them.
local function tt_release(t, ids)
  if #ids == 0 then return end
  local P = t.P
  local f, ks = {}, {}
  for i, id in ipairs(ids) do
    f[i] = istr(id)
    ks[i] = P .. 's:' .. f[i]
  end
  call_pairs('ZREM', P .. 'held', f)
  call_pairs('HDEL', P .. 'ref', f)
  if t.defer then
    for _, k in ipairs(ks) do t.defer[#t.defer + 1] = k end
  else
    del_all(ks)
  end
end

local function tt_free(t, zero)
  t.c.sfreed = t.c.sfreed + #zero
  tt_release(t, zero)
end

-- Items left (deleted, retired by max_times_sampled): their steps are freed if nothing
-- else needs them. An item evicted with its first step was accounted already.
RT_HOOKS.left = function(t, keys)
  if not t.c then tt_load(t) end
  local f = {}
  for i, key in ipairs(keys) do f[i] = istr(key) end
  local entries = hmget_all(t.P .. 'pl', f)
  local zero = {}
  for i, entry in ipairs(entries) do
    local row = tt_row(entry)
    local first = istr(row[1])
    if redis.call('HGET', t.P .. 'first', first) == f[i] then
      redis.call('HDEL', t.P .. 'first', first)
      tt_unref(t, row, zero)
    end
  end
  tt_free(t, zero)
end

RT_HOOKS.drop = function(P)
  local ks = {}
  for _, id in ipairs(redis.call('ZRANGE', P .. 'held', 0, -1)) do ks[#ks + 1] = P .. 's:' .. id end
  del_all(ks)
  redis.call('DEL', P .. 'held', P .. 'ref', P .. 'own', P .. 'first', P .. 'wr')
end

-- Drop writer w's earliest pending window (its first step is being evicted).
local function tt_drop_first(t, w)
  local cut = math.min(#w.pend, t.stride)
  local unpinned, rest = {}, {}
  for i, id in ipairs(w.pend) do
    if i <= cut then unpinned[#unpinned + 1] = id else rest[#rest + 1] = id end
  end
  w.pend, w.start = rest, w.start + t.stride
  return unpinned
end

-- Evict the oldest held step with the item starting there and its writer's earliest
-- pending window; free what only they needed.
local function tt_evict_oldest(t)
  local P = t.P
  local xs = redis.call('ZRANGE', P .. 'held', 0, 0)[1]
  local zero = {}
  local key = redis.call('HGET', P .. 'first', xs)
  if key then
    redis.call('HDEL', P .. 'first', xs)
    tt_unref(t, tt_row(redis.call('HGET', P .. 'pl', key)), zero)
    rt_remove(t, {tonumber(key)})
    t.deletes = t.deletes + 1
    t.evictions = t.evictions + 1
  end
  local owner = redis.call('HGET', P .. 'own', xs)
  if owner then
    tt_unpin(t, tt_drop_first(t, tt_writer(t, owner)), zero)
    t.c.wdropped = t.c.wdropped + 1
  end
  t.c.sevicted = t.c.sevicted + 1
  t.c.sfreed = t.c.sfreed + #zero - 1
  tt_release(t, zero)
end

-- How many windows the next k steps of writer w complete.
local function tt_completed(t, w, k)
  local lo = math.max(w.start, w.pos - t.length + 1)
  local first = math.ceil(lo / t.stride) * t.stride
  local last = w.pos + k - t.length
  if last < first then return 0 end
  return math.floor((last - first) / t.stride) + 1
end

local function tt_stored(t, w)
  local p = w.pos
  return p >= w.start and (t.stride <= t.length or p % t.stride < t.length)
end

-- Append one step (staged at st:<entry>) of writer wid; the window it completes, if
-- any, becomes an item of priority p (nil: the default).
local function tt_step(t, w, wid, entry, p)
  local P, length, stride = t.P, t.length, t.stride
  t.c.appended = t.c.appended + 1
  if tt_stored(t, w) and redis.call('ZCARD', P .. 'held') >= t.max_steps then
    tt_evict_oldest(t)
  end
  local id = -1
  if tt_stored(t, w) then
    id = t.c.next_id
    t.c.next_id = id + 1
    local ids = istr(id)
    redis.call('RENAME', P .. 'st:' .. entry, P .. 's:' .. ids)
    redis.call('ZADD', P .. 'held', id, ids)
    redis.call('HSET', P .. 'ref', ids, 1)
    redis.call('HSET', P .. 'own', ids, wid)
    t.c.stored = t.c.stored + 1
  else
    redis.call('DEL', P .. 'st:' .. entry)
  end
  local pos = w.pos
  if pos >= w.start then w.pend[#w.pend + 1] = id end
  w.pos = pos + 1
  local s = pos - length + 1
  if s < w.start or s % stride ~= 0 then return end
  local row = {}
  for i = s - w.start + 1, s - w.start + length do row[#row + 1] = w.pend[i] end
  local key = t.next_key
  t.next_key = key + 1
  rt_add(t, {{key = key, p = p or t.default, entry = TT_ROW .. tt_join(row)}})
  for _, rid in ipairs(row) do redis.call('HINCRBY', P .. 'ref', istr(rid), 1) end
  redis.call('HSET', P .. 'first', istr(row[1]), istr(key))
  t.inserts = t.inserts + 1
  local cut = math.min(#w.pend, s + stride - w.start)
  local unpinned, rest = {}, {}
  for i, x in ipairs(w.pend) do
    if i <= cut then unpinned[#unpinned + 1] = x else rest[#rest + 1] = x end
  end
  w.pend, w.start = rest, s + stride
  tt_free(t, tt_unpin(t, unpinned, {}))
end

-- tt_append: ARGV gen opid writer k wait_ms member np prio*np entry*k (writer: its id,
-- or '' for a writer's first append, which opens it; entries: refs of steps staged at
-- st:<ref> in the same transaction; member: '' or the one a 'wait' reply gave). All k
-- steps, or none and the op registered as a waiting insert of the windows they
-- complete. -> {'ok', first key, items, writer} | {'wait', member} | {'closed', waited}
-- | {'nowriter'} | {'gone'}
local function tt_append(keys, args)
  local np = tonumber(args[7])
  local first_entry = 8 + np
  local t, now = rt_begin(keys, args[1])
  if not t or not t.traj then
    rt_drop_staged(prefix(keys[1]), args, first_entry)
    return {'gone'}
  end
  tt_load(t)
  local opid, wid, k, wait_ms = args[2], args[3], tonumber(args[4]), tonumber(args[5])
  local w = wid == '' and {pos = 0, start = 0, pend = {}} or tt_writer(t, wid)
  local m = w and tt_completed(t, w, k) or 0
  local member = args[6] ~= '' and args[6] or (istr(m) .. ':' .. opid)
  if t.closed or not w then
    local was = reg_del(t, 'i', member, now)
    rt_drop_staged(t.P, args, first_entry)
    notify(t)
    if not w then return {'nowriter'} end
    return {'closed', was and 1 or 0}
  end
  if m > 0 then
    local head = redis.call('ZRANGE', t.P .. 'wi', 0, 0)[1]
    if (head and head ~= member) or not can_insert(t, m) then
      rt_drop_staged(t.P, args, first_entry)
      reg_add(t, 'i', member, now, wait_ms)
      rt_save(t)
      return {'wait', member}
    end
  end
  if wid == '' then  -- a writer's first append opens it
    wid = istr(t.c.next_writer)
    t.c.next_writer = t.c.next_writer + 1
    t.c.writers = t.c.writers + 1
    t.wc[wid] = w
  end
  t.default = np == 0 and max_priority(t) or nil
  local base = t.next_key
  for j = 1, k do
    tt_step(t, w, wid, args[first_entry + j - 1], np > 0 and tonumber(args[7 + j]) or nil)
  end
  reg_del(t, 'i', member, now)
  rt_save(t)
  notify(t)
  return {'ok', base, t.next_key - base, wid}
end

-- tt_writer: ARGV gen op(end|close) writer -> {'ok'} | {'nowriter'} | {'gone'}. end: the
-- writer's episode ends (its pending windows dropped, the steps only they needed
-- freed); close: end, and forget the writer.
local function tt_writer_op(keys, args)
  local t = rt_begin(keys, args[1])
  if not t or not t.traj then return {'gone'} end
  tt_load(t)
  local wid = args[3]
  local w = tt_writer(t, wid)
  if not w then return {'nowriter'} end
  local pend = w.pend
  if #pend > 0 then t.c.wdropped = t.c.wdropped + math.ceil(#pend / t.stride) end
  w.pos, w.start, w.pend = 0, 0, {}
  tt_free(t, tt_unpin(t, pend, {}))
  if args[2] == 'close' then
    t.wc[wid] = false
    t.c.writers = t.c.writers - 1
  end
  rt_save(t)
  return {'ok'}
end

-- tt_sample: ARGV as rt_sample's. The replay table's draw (limiter, selector, times
-- sampled, retirements), then the draws' steps COPYed to o:<wid>.<i> (i = 1 ..
-- n * length, window by window) for the MGET and DEL behind it; steps freed by the
-- draw are deleted after the copies. -> rt_sample's reply (no small payloads)
local function tt_sample(keys, args)
  local defer = {}
  local r = rt_sample(keys, args, defer)
  if r[1] ~= 'ok' then return r end
  local P = prefix(keys[1])
  local length = tonumber(redis.call('HGET', keys[1], 'length'))
  local out, keep_ms = P .. 'o:' .. args[2] .. '.', args[5]
  for j, entry in ipairs(r[4]) do
    for i, id in ipairs(tt_row(entry)) do
      local dst = out .. ((j - 1) * length + i)
      redis.call('COPY', P .. 's:' .. istr(id), dst, 'REPLACE')
      if keep_ms ~= '0' then redis.call('PEXPIRE', dst, keep_ms) end
    end
  end
  if #defer > 0 then del_all(defer) end
  return {'ok', r[2], r[3], {}}
end

-- tt_stats (read-only): ARGV gen -> rt_stats' reply, then max_steps, steps held, and
-- the counters appended stored sevicted sfreed wdropped writers; or {}
local function tt_stats(keys, args)
  local out = rt_stats(keys, args)
  if #out == 0 then return out end
  local m = redis.call('HMGET', keys[1], 'max_steps', 'appended', 'stored', 'sevicted',
    'sfreed', 'wdropped', 'writers')
  out[#out + 1] = tonumber(m[1])
  out[#out + 1] = redis.call('ZCARD', prefix(keys[1]) .. 'held')
  for i = 2, #m do out[#out + 1] = tonumber(m[i]) end
  return out
end

redis.register_function('tt_append', tt_append)
redis.register_function{function_name = 'tt_stats', callback = tt_stats, flags = {'no-writes'}}
-- Calls that free memory or only take must work when the server is full.
redis.register_function{function_name = 'tt_sample', callback = tt_sample, flags = {'allow-oom'}}
redis.register_function{function_name = 'tt_writer', callback = tt_writer_op,
                        flags = {'allow-oom'}}
