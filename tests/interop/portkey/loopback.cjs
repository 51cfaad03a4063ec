// Preloaded into Portkey's gateway by tests/interop/servers.py (node --require): its start-up
// script listens on every interface and has no option to choose one, so a listen() given only a
// port is bound to 127.0.0.1 here instead. Nothing else of the gateway is changed.
"use strict";
const net = require("node:net");

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number") {
    const callback = args.find((a) => typeof a === "function");
    return callback ? listen.call(this, args[0], "127.0.0.1", callback) : listen.call(this, args[0], "127.0.0.1");
  }
  return listen.apply(this, args);
};
