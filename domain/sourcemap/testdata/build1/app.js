(()=>{function e(t){return(t/100).toFixed(2)}function c(t){let r=0;for(let o of t.items)r+=o.price*o.qty;return r}function n(t){let r=c(t);return"Total: "+e(r)}function i(t){let r=t.carts[t.current];return n(r)}globalThis.shop={checkout:i};})();
//# sourceMappingURL=app.js.map
